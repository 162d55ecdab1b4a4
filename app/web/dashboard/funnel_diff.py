"""Side by side, what changed between two graphs of a funnel (two versions, or a version and the
draft): steps added, removed and changed field by field, and the triggers and settings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from litestar import Request, get
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from app.engines.funnels.definitions import service
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import page
from app.web.dashboard.funnel_editor_forms import KIND_LABELS
from app.web.deps import Reads

PREFIX = "/ui/funnels"


@dataclass
class StepChange:
    node_id: str
    kind: str
    change: str
    """``added``, ``removed`` or ``changed``."""
    fields: list[tuple[str, str, str]] = field(default_factory=list)
    """(field, before, after) for a changed step; every field for an added or removed one."""


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    old = {n["id"]: n for n in before.get("nodes", []) if isinstance(n, dict) and "id" in n}
    new = {n["id"]: n for n in after.get("nodes", []) if isinstance(n, dict) and "id" in n}
    steps: list[StepChange] = []
    for node_id in [*old, *(k for k in new if k not in old)]:
        a, b = old.get(node_id), new.get(node_id)
        node = b or a or {}
        kind = KIND_LABELS.get(str(node.get("kind")), str(node.get("kind")))
        if a is None or b is None:
            present: dict[str, Any] = node
            rows = [
                (k, "" if a is None else _shown(v), _shown(v) if a is None else "")
                for k, v in present.items()
                if k not in ("id",)
            ]
            steps.append(StepChange(node_id, kind, "added" if a is None else "removed", rows))
            continue
        keys = [*a, *(k for k in b if k not in a)]
        rows = [(k, _shown(a.get(k)), _shown(b.get(k))) for k in keys if a.get(k) != b.get(k)]
        if rows:
            steps.append(StepChange(node_id, kind, "changed", rows))
    others = [
        (name, _shown(before.get(name)), _shown(after.get(name)))
        for name in ("triggers", "entry_predicate", "settings")
        if before.get(name) != after.get(name)
    ]
    return {"steps": steps, "others": others}


@get(f"{PREFIX}/{{funnel_id:int}}/versions/{{number:int}}/compare")
async def compare_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    number: FromPath[int],
    against: FromQuery[str] = "draft",
) -> Template:
    """Version ``number`` beside ``against``: the draft, or another version's number."""
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    version = await service.get_version(session, principal.workspace_id, funnel_id, number)
    versions = await service.versions(session, principal.workspace_id, funnel_id)
    if against.isdigit():
        other = await service.get_version(session, principal.workspace_id, funnel_id, int(against))
        after, after_name = other.definition, f"version {other.number}"
    else:
        after, after_name = funnel.draft, "the draft"
    return page(
        request,
        "funnels/compare.html",
        principal,
        funnel=funnel,
        version=version,
        versions=versions,
        against=against,
        after_name=after_name,
        changes=diff(version.definition, after),
    )


ROUTES: list[Any] = [compare_page]
