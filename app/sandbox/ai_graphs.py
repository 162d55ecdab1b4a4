"""The AI simulator's answers to structured-output requests for a funnel definition.

A chat-completions request whose ``response_format`` is ``{"type": "json_schema", "json_schema":
{"name": "funnel_definition", ...}}`` is answered, as OpenAI documents for structured outputs,
with the JSON document as the message's ``content`` (a string) and ``refusal: null``. Which
document is chosen deterministically from the text of the first user message (the description),
by a marker in it:

- ``sandbox:garbage``  — an answer that is not JSON (``Sure! Here is your funnel: {…``);
- ``sandbox:hopeless`` — every answer is a graph the validator refuses (an e-mail without a
  subject whose body uses the unknown variable ``{{frist_name}}``);
- ``sandbox:repair``   — that refused graph first, then, once the conversation holds an answer of
  the assistant (a repair round), the valid graph;
- ``sandbox:refuse``   — ``content: null`` and a ``refusal`` (the model declines);
- ``sandbox:shapeless`` — JSON that is not a definition (``{"steps": [...]}``) every time;
- anything else        — the valid graph at once.

The valid graph: a message on the first allowed channel, a wait of two days, a second message.
The channel and the trigger are read from the line ``Constraints (JSON): {...}`` of the first user
message when present (``channels``, ``trigger``); otherwise e-mail and ``manual``.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA_NAME = "funnel_definition"
CONSTRAINTS_LINE = "Constraints (JSON): "


def wants_graph(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format")
    return (
        isinstance(fmt, dict)
        and fmt.get("type") == "json_schema"
        and isinstance(fmt.get("json_schema"), dict)
        and fmt["json_schema"].get("name") == SCHEMA_NAME
    )


def format_error(body: dict[str, Any]) -> str | None:
    """OpenAI's refusal of a malformed ``response_format`` (``None`` when it is well formed)."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        return "Invalid value for 'response_format.type'."
    if fmt["type"] != "json_schema":
        return None
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return "Missing required parameter: 'response_format.json_schema.name'."
    name = spec["name"]
    if not name or len(name) > 64 or not all(c.isalnum() or c in "_-" for c in name):
        return "Invalid 'response_format.json_schema.name': must match ^[a-zA-Z0-9_-]{1,64}$."
    if not isinstance(spec.get("schema", {}), dict):
        return "Invalid type for 'response_format.json_schema.schema': expected an object."
    return None


def _description(messages: list[dict[str, str]]) -> str:
    return next((m["content"] for m in messages if m["role"] == "user"), "")


def _constraints(description: str) -> dict[str, Any]:
    for line in description.splitlines():
        if line.startswith(CONSTRAINTS_LINE):
            try:
                found = json.loads(line[len(CONSTRAINTS_LINE) :])
            except json.JSONDecodeError:
                return {}
            return found if isinstance(found, dict) else {}
    return {}


def _message(channel: str, node_id: str, subject: str, body: str, **extra: Any) -> dict[str, Any]:
    if channel == "sms":
        return {"kind": "send_sms", "id": node_id, "text": body, **extra}
    if channel == "push":
        return {"kind": "send_push", "id": node_id, "title": subject, "body": body, **extra}
    if channel == "letter":
        return {"kind": "send_letter", "id": node_id, "body": body, **extra}
    return {"kind": "send_email", "id": node_id, "subject": subject, "body": body, **extra}


def valid_graph(constraints: dict[str, Any]) -> dict[str, Any]:
    channels = constraints.get("channels") or ["email"]
    channel = channels[0] if isinstance(channels, list) and channels else "email"
    trigger = constraints.get("trigger") or {"kind": "manual"}
    return {
        "triggers": [trigger],
        "nodes": [
            _message(
                channel,
                "welcome",
                "Welcome, {{first_name}}",
                "Hello {{first_name}}, thank you for joining us.",
                entry=True,
                next="pause",
            ),
            {"kind": "wait", "id": "pause", "days": 2, "next": "tips"},
            _message(
                channel, "tips", "Three tips to start", "Hello {{first_name}}, here are three tips."
            ),
        ],
    }


def invalid_graph(constraints: dict[str, Any]) -> dict[str, Any]:
    graph = valid_graph(constraints)
    graph["nodes"][0] = {
        "kind": "send_email",
        "id": "welcome",
        "entry": True,
        "subject": "",
        "body": "Hello {{frist_name}}, thank you for joining us.",
        "next": "pause",
    }
    return graph


def answer(messages: list[dict[str, str]]) -> tuple[str | None, str | None]:
    """``(content, refusal)`` for a structured-output request for a funnel definition."""
    description = _description(messages)
    constraints = _constraints(description)
    repaired = any(m["role"] == "assistant" for m in messages)
    if "sandbox:garbage" in description:
        return "Sure! Here is your funnel: {nodes: [welcome, wait 2 days", None
    if "sandbox:refuse" in description:
        return None, "I'm sorry, I cannot help with that request."
    if "sandbox:shapeless" in description:
        return json.dumps({"steps": ["welcome", "wait two days", "tips"]}), None
    if "sandbox:hopeless" in description or ("sandbox:repair" in description and not repaired):
        graph = invalid_graph(constraints)
    else:
        graph = valid_graph(constraints)
    return json.dumps(graph, ensure_ascii=False), None
