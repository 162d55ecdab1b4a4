"""Stored JSON documents ↔ typed structs. Rule parts are stored as ``msgspec.to_builtins`` output
(decimals and dates as strings) and read back through the same schemas that validated them."""

from __future__ import annotations

from typing import Any, cast

import msgspec

from app.engines.adrules.models import Rule, Task
from app.engines.adrules.schemas import (
    Approval,
    PreFilters,
    RuleDocument,
    Schedule,
    TaskDocument,
    TaskIn,
)


def dump(value: msgspec.Struct) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


def load_schedule(doc: dict[str, Any]) -> Schedule:
    return cast(Schedule, msgspec.convert(doc, Schedule))


def load_prefilters(doc: dict[str, Any]) -> PreFilters:
    return msgspec.convert(doc, PreFilters)


def task_body(task: TaskIn) -> dict[str, Any]:
    """What a task row's ``document`` holds (its id and name live in columns)."""
    body = dump(task)
    body.pop("id", None)
    body.pop("name", None)
    return body


def load_task(task: Task) -> TaskDocument:
    return msgspec.convert({**task.document, "id": task.id, "name": task.name}, TaskDocument)


def rule_document(rule: Rule, tasks: list[Task], timezone: str) -> RuleDocument:
    return RuleDocument(
        id=rule.id,
        workspace_id=rule.workspace_id,
        name=rule.name,
        timezone=timezone,
        prefilters=load_prefilters(rule.prefilters),
        tasks=[load_task(t) for t in tasks],
        updated_at=rule.updated_at,
        level=rule.level,  # type: ignore[arg-type]  # checked when the rule was saved
        attribution_windows=rule.attribution_windows or None,
        shadow=rule.status == "shadow",
        approval=load_approval(rule.approval),
    )


def load_approval(doc: dict[str, Any] | None) -> Approval | None:
    """The rule's approval setting, None when its changes are written at once."""
    if not doc:
        return None
    approval = msgspec.convert(doc, Approval)
    return approval if approval.required else None
