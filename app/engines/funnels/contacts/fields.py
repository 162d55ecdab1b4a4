"""A workspace's typed custom fields (text, number, boolean, date), the check of a value against
its field's type, and the check of a segment predicate against the fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.predicate_checks import problems
from app.engines.funnels.contacts.segments import FIELD_TYPES, Predicate
from app.engines.funnels.models import (
    FieldDefinition,
)
from app.errors import ValidationFailed


async def field_types(session: ReadSession, workspace_id: int) -> dict[str, str]:
    rows = await session.execute(
        scoped_select(FieldDefinition, workspace_id, FieldDefinition.key, FieldDefinition.type)
    )
    return {k: t for k, t in rows.all()}


async def check_predicate(
    session: ReadSession, workspace_id: int, predicate: Predicate, *, field: str
) -> dict[str, str]:
    """Hold a predicate that picks contacts (a segment, a campaign's audience, who enters a
    funnel) to its rules against the workspace's fields: a field that exists, an operator that
    applies to its type, a value of that type. Checked before it is compiled, so a broken one is
    the caller's 422 and never a failed query. Returns the field types it was checked against
    (what compiling it needs).

    Raises:
        ValidationFailed: naming ``field``, one detail per problem.
    """
    custom = await field_types(session, workspace_id)
    found = problems(predicate, custom)
    if found:
        raise ValidationFailed(
            f"{field}: " + "; ".join(found),
            details=[{"field": field, "message": p, "code": "invalid"} for p in found],
        )
    return custom


async def define_field(
    session: WriteSession, workspace_id: int, key: str, type_: str, label: str = ""
) -> FieldDefinition:
    if type_ not in FIELD_TYPES:
        raise ValidationFailed.field("type", f"must be one of {', '.join(FIELD_TYPES)}")
    if not key.isidentifier():
        raise ValidationFailed.field(
            "key", "letters, digits and underscores, not starting with a digit"
        )
    existing = await session.scalar(
        scoped_select(FieldDefinition, workspace_id).where(FieldDefinition.key == key)
    )
    if existing is not None:
        if existing.type != type_:
            raise ValidationFailed.field("type", f"field '{key}' already exists as {existing.type}")
        return existing
    definition = FieldDefinition(workspace_id=workspace_id, key=key, type=type_, label=label)
    session.add(definition)
    await session.flush()
    return definition


def check_field_value(key: str, kind: str, value: Any) -> Any:
    """The value as stored, or ValidationFailed naming ``fields.<key>``."""
    if value is None:
        return None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationFailed.field(f"fields.{key}", "must be a number")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ValidationFailed.field(f"fields.{key}", "must be true or false")
        return value
    if kind == "date":
        if not isinstance(value, str):
            raise ValidationFailed.field(f"fields.{key}", "must be a date (YYYY-MM-DD)")
        try:
            datetime.strptime(value, "%Y-%m-%d")  # noqa: DTZ007 - a calendar date
        except ValueError:
            raise ValidationFailed.field(f"fields.{key}", "must be a date (YYYY-MM-DD)") from None
        return value
    if not isinstance(value, str):
        raise ValidationFailed.field(f"fields.{key}", "must be text")
    return value
