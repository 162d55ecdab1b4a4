"""Cancelling effects not yet delivered (a contact deleted, a run that left, a goal met), each with a
``cancelled`` delivery event naming why.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, update

from app.db.dialect import insert
from app.db.session import WriteSession
from app.engines.funnels.models import (
    OUTBOX,
    OUTBOX_CANCELLED,
    OUTBOX_PENDING,
    DeliveryEvent,
    OutboxEffect,
)


async def cancel_pending_effects(
    session: WriteSession,
    now: datetime,
    *,
    reason: str,
    contact_id: int | None = None,
    run_id: int | None = None,
) -> int:
    """Cancel the not-yet-delivered effects of a contact or of a run, recording why."""
    conditions: list[ColumnElement[bool]] = []
    if contact_id is not None:
        conditions.append(OutboxEffect.contact_id == contact_id)
    if run_id is not None:
        conditions.append(OutboxEffect.run_id == run_id)
    rows = (
        await session.execute(
            OUTBOX.transition(
                update(OutboxEffect)
                .execution_options(synchronize_session=False)
                .where(*conditions),
                OUTBOX_CANCELLED,
                from_=(OUTBOX_PENDING,),
            )
            .values(finished_at=now, last_error=reason, lease_owner=None)
            .returning(OutboxEffect.id, OutboxEffect.workspace_id, OutboxEffect.contact_id)
        )
    ).all()
    if rows:
        await session.execute(
            insert(session, DeliveryEvent),
            [
                {
                    "workspace_id": ws,
                    "outbox_id": oid,
                    "contact_id": cid,
                    "kind": "cancelled",
                    "detail": reason,
                    "at": now,
                }
                for oid, ws, cid in rows
            ],
        )
    return len(rows)
