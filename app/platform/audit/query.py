"""Reading the audit log: one organisation's entries, newest first, filtered, a page at a time
or every match as CSV."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, select

from app.db import keyset
from app.db.session import ReadSession
from app.errors import ValidationFailed
from app.platform.audit.models import ACTOR_KINDS, AuditEntry

CSV_COLUMNS = (
    "id",
    "at",
    "action",
    "object_type",
    "object_id",
    "workspace_id",
    "actor_kind",
    "user_id",
    "api_key_id",
    "client_address",
    "user_agent",
    "before",
    "after",
)
CSV_MAX_ROWS = 100_000
"""An export is bounded; narrow the filters (dates) for more."""


@dataclass(frozen=True, slots=True)
class AuditFilter:
    action: str | None = None
    """An exact action (``api_key.created``) or a family ending in ``.*`` (``api_key.*``)."""
    actor: str | None = None
    """``user:<id>``, ``api_key:<id>``, or a kind alone (``system``, ``anonymous``)."""
    object_type: str | None = None
    since: datetime | None = None
    """From this time, inclusive."""
    until: datetime | None = None
    """Before this time, exclusive."""
    workspace_id: int | None = None


def _actor_clause(stmt: Select[Any], actor: str) -> Select[Any]:
    kind, _, ident = actor.partition(":")
    if kind not in ACTOR_KINDS:
        raise ValidationFailed.field(
            "actor", "must be user:<id>, api_key:<id>, system or anonymous"
        )
    stmt = stmt.where(AuditEntry.actor_kind == kind)
    if not ident:
        return stmt
    if kind not in ("user", "api_key") or not (ident.isascii() and ident.isdigit()):
        raise ValidationFailed.field(
            "actor", "must be user:<id>, api_key:<id>, system or anonymous"
        )
    number = int(ident)
    if number >= 2**63:
        raise ValidationFailed.field("actor", "names no id this log can hold")
    column = AuditEntry.user_id if kind == "user" else AuditEntry.api_key_id
    return stmt.where(column == number)


def _filtered(organisation_id: int, f: AuditFilter) -> Select[Any]:
    stmt = select(AuditEntry).where(AuditEntry.organisation_id == organisation_id)
    if f.workspace_id is not None:
        stmt = stmt.where(AuditEntry.workspace_id == f.workspace_id)
    if f.action:
        if f.action.endswith(".*"):
            stmt = stmt.where(AuditEntry.action.startswith(f.action[:-1], autoescape=True))
        else:
            stmt = stmt.where(AuditEntry.action == f.action)
    if f.object_type:
        stmt = stmt.where(AuditEntry.object_type == f.object_type)
    if f.actor:
        stmt = _actor_clause(stmt, f.actor)
    if f.since is not None:
        stmt = stmt.where(AuditEntry.at >= f.since)
    if f.until is not None:
        stmt = stmt.where(AuditEntry.at < f.until)
    if f.since is not None and f.until is not None and f.until <= f.since:
        raise ValidationFailed.field("to", "must be later than 'from'")
    return stmt


async def entries(
    session: ReadSession,
    organisation_id: int,
    f: AuditFilter,
    *,
    limit: int,
    before_id: int | None = None,
) -> list[AuditEntry]:
    """Up to ``limit`` entries, newest first, older than ``before_id`` when given."""
    stmt = _filtered(organisation_id, f)
    if before_id is not None:
        stmt = stmt.where(keyset.before(AuditEntry.id, before_id))
    rows = await session.scalars(stmt.order_by(AuditEntry.id.desc()).limit(limit))
    return [row for row in rows if isinstance(row, AuditEntry)]


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    text = str(value)
    # A spreadsheet runs a cell starting with these as a formula (CSV injection).
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


async def entries_csv(session: ReadSession, organisation_id: int, f: AuditFilter) -> str:
    """Every matching entry (newest first, at most :data:`CSV_MAX_ROWS`) as CSV text."""
    stmt = _filtered(organisation_id, f).order_by(AuditEntry.id.desc()).limit(CSV_MAX_ROWS)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for entry in await session.scalars(stmt):
        writer.writerow([_cell(getattr(entry, c)) for c in CSV_COLUMNS])
    return out.getvalue()


def parse_when(field: str, text: str | None) -> datetime | None:
    """A filter bound from a query: an ISO 8601 time with its offset, or a date (midnight UTC)."""
    if text is None or not text.strip():
        return None
    raw = text.strip()
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ValidationFailed.field(
            field, "must be an ISO 8601 date or time with its offset (2026-01-31T09:00:00Z)"
        ) from None
    if when.tzinfo is None:
        if len(raw) != 10:  # a bare date means midnight UTC; a time needs its offset
            raise ValidationFailed.field(field, "must give its UTC offset (Z or +01:00)")
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def audit_filter(
    *,
    action: str | None,
    actor: str | None,
    object_type: str | None,
    since: str | None,
    until: str | None,
    workspace_id: int | None = None,
) -> AuditFilter:
    """The filter of a request's query values, each checked (422 naming the field)."""
    for field, value in (("action", action), ("object_type", object_type)):
        if value is not None and len(value) > 64:
            raise ValidationFailed.field(field, "must be at most 64 characters")
    if actor is not None and len(actor) > 40:
        raise ValidationFailed.field(
            "actor", "must be user:<id>, api_key:<id>, system or anonymous"
        )
    return AuditFilter(
        action=action or None,
        actor=actor or None,
        object_type=object_type or None,
        since=parse_when("from", since),
        until=parse_when("to", until),
        workspace_id=workspace_id,
    )


def described(f: AuditFilter) -> dict[str, Any]:
    """The filters of an export, as the entry recording the export keeps them."""
    return {
        "action": f.action,
        "actor": f.actor,
        "object_type": f.object_type,
        "from": f.since.isoformat() if f.since else None,
        "to": f.until.isoformat() if f.until else None,
    }
