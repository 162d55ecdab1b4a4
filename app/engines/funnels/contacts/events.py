"""Contact events: what happened to a contact, stored in the transaction that caused it; the
trigger matcher picks them up after commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.db.dialect import insert
from app.db.session import WriteSession
from app.engines.funnels.models import (
    ContactEvent,
)


async def record_event(
    session: WriteSession,
    *,
    workspace_id: int,
    contact_id: int,
    name: str,
    source: str,
    now: datetime,
    occurred_at: datetime | None = None,
    external_id: str | None = None,
    properties: Mapping[str, Any] | None = None,
) -> int | None:
    """Store an event; returns its id, or ``None`` when ``external_id`` was seen before."""
    stmt = (
        insert(session, ContactEvent)
        .values(
            workspace_id=workspace_id,
            contact_id=contact_id,
            name=name,
            source=source,
            external_id=external_id,
            properties=dict(properties or {}),
            occurred_at=occurred_at or now,
            created_at=now,
        )
        .on_conflict_do_nothing()
        .returning(ContactEvent.id)
    )
    event_id: int | None = await session.scalar(stmt)
    return event_id
