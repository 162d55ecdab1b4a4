"""The pure parts of a drafting round (FN-34): read the model's answer as a definition with the
decoder every graph goes through, put the person's constraints on it, and say what is wrong with
it in the validator's own words.

An answer that is JSON but not a definition (a field missing, an unknown node kind) is a finding
like any other and goes back to the model; an answer that is not JSON at all breaks the
structured-output contract and ends the attempt (:class:`NotJson`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from app.engines.funnels.definitions.graph import Definition, decode_definition, kind_of
from app.engines.funnels.definitions.problems import Problem
from app.engines.funnels.drafting.prompt import SEND_KIND_CHANNEL, DraftRequest

_NODE_PATH = re.compile(r"`\$\.nodes\[(\d+)\]")


class NotJson(Exception):
    """The answer is not a JSON object."""


def parse_answer(text: str) -> tuple[Definition | None, list[Problem]]:
    """The answer as a definition when it decodes, or the decoder's finding when it does not
    (on the node the failing path points at)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotJson(f"the answer is not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(raw, dict):
        raise NotJson("the answer is JSON but not an object")
    try:
        return decode_definition(raw), []
    except msgspec.ValidationError as exc:
        message = str(exc)
        return None, [Problem("FN-26", "schema", message, _node_at(raw, message))]


def _node_at(raw: dict[str, Any], message: str) -> str | None:
    match = _NODE_PATH.search(message)
    nodes = raw.get("nodes")
    if match is None or not isinstance(nodes, list) or int(match.group(1)) >= len(nodes):
        return None
    node = nodes[int(match.group(1))]
    node_id = node.get("id") if isinstance(node, dict) else None
    return node_id if isinstance(node_id, str) else None


def impose(definition: Definition, request: DraftRequest) -> Definition:
    """The definition with the trigger and the audience the person chose, whatever the model
    wrote there."""
    return msgspec.structs.replace(
        definition, triggers=[request.trigger], entry_predicate=request.audience
    )


def channel_findings(definition: Definition, request: DraftRequest) -> list[Problem]:
    """Messages on a channel the person did not allow."""
    allowed = set(request.channels)
    out: list[Problem] = []
    for node in definition.nodes:
        channel = SEND_KIND_CHANNEL.get(kind_of(node))
        if channel is not None and channel not in allowed:
            out.append(
                Problem(
                    "FN-34",
                    "channel_not_allowed",
                    f"{kind_of(node)} sends on {channel}, but only "
                    f"{', '.join(sorted(allowed))} may be used",
                    node.id,
                )
            )
    return out


def finding_line(problem: Problem) -> str:
    """One finding as the model reads it: the rule, the node and the validator's message."""
    where = f"node '{problem.node_id}'" if problem.node_id else "the graph"
    return f"[{problem.rule} {problem.code}] {where}: {problem.message}"


def finding_dict(problem: Problem) -> dict[str, Any]:
    return {
        "node_id": problem.node_id,
        "rule": problem.rule,
        "code": problem.code,
        "message": problem.message,
    }
