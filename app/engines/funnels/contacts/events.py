"""Contact events: what happened to a contact, stored in the transaction that caused it; the
trigger matcher picks them up after commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict, Unpack

from app.db.dialect import insert
from app.db.session import WriteSession
from app.engines.funnels.models import (
    ContactEvent,
)

ROWS_PER_STATEMENT = 500
"""Values of one IN list (well under SQLite's 32,766 bound parameters)."""


class EventFields(TypedDict):
    workspace_id: int
    contact_id: int
    name: str
    source: str
    now: datetime
    occurred_at: NotRequired[datetime | None]
    external_id: NotRequired[str | None]
    properties: NotRequired[Mapping[str, Any] | None]


def event_row(**fields: Unpack[EventFields]) -> dict[str, Any]:
    """The row of one contact event, for :func:`record_events`."""
    now = fields["now"]
    return {
        "workspace_id": fields["workspace_id"],
        "contact_id": fields["contact_id"],
        "name": fields["name"],
        "source": fields["source"],
        "external_id": fields.get("external_id"),
        "properties": dict(fields.get("properties") or {}),
        "occurred_at": fields.get("occurred_at") or now,
        "created_at": now,
    }


async def record_event(session: WriteSession, **fields: Unpack[EventFields]) -> int | None:
    """Store an event; returns its id, or ``None`` when ``external_id`` was seen before."""
    stmt = (
        insert(session, ContactEvent)
        .values(event_row(**fields))
        .on_conflict_do_nothing()
        .returning(ContactEvent.id)
    )
    event_id: int | None = await session.scalar(stmt)
    return event_id


async def record_events(session: WriteSession, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store many events (rows of :func:`event_row`), ids in the order given; one whose
    ``external_id`` was seen before is skipped, as :func:`record_event` skips it."""
    if rows:
        # One statement run as executemany (compiled once and cached, unlike a multi-row
        # VALUES clause), on the table rather than the ORM entity: the ORM's bulk insert would
        # look at every row again for nothing.
        stmt = insert(session, ContactEvent.__table__).on_conflict_do_nothing()
        await session.execute(stmt, [dict(row) for row in rows])
