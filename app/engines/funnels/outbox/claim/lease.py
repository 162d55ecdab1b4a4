"""Leasing due effects: a batch taken exactly once, its rows decoded for their channels.

The lease moves ``next_attempt_at`` to the lease expiry, so an effect whose deliverer died is due
again by itself; ``attempts`` counts the try when it is taken.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.db.session import Database, ReadSession
from app.engines.funnels.models import OUTBOX_PENDING, OutboxEffect
from app.engines.funnels.outbox import payloads
from app.engines.funnels.outbox.channel import LeasedEffect
from app.engines.funnels.outbox.states import OUTBOX
from app.scheduling.claim import Claim

DELIVERY = Claim(
    table=OutboxEffect.__table__,  # type: ignore[arg-type]
    due=f"{OUTBOX.where(OUTBOX_PENDING)} AND next_attempt_at <= :now",
    order_by="next_attempt_at",
    returning=(
        "id",
        "workspace_id",
        "contact_id",
        "channel",
        "idempotency_key",
        "payload",
        "attempts",
    ),
    owner="lease_owner",
    # The lease expiry is the due time: an effect whose deliverer died is due again by itself.
    expires="next_attempt_at",
    sets={"attempts": "attempts + 1"},
    held=OUTBOX.where_keyed(OUTBOX_PENDING),
)


async def lease(
    db: Database, *, owner: str, now: datetime, limit: int, lease_seconds: int
) -> list[LeasedEffect]:
    """Lease up to ``limit`` due effects for ``owner``, in id order."""
    rows = await DELIVERY.take(db, now=now, limit=limit, owner=owner, lease_seconds=lease_seconds)
    return [
        LeasedEffect(r[0], r[1], r[2], r[3], r[4], payloads.decode(r[3], r[5]), r[6])
        for r in sorted(rows, key=lambda r: r[0])
    ]


async def still_ours(
    session: ReadSession, effects: list[LeasedEffect], owner: str, at: datetime
) -> set[int]:
    """The effects of the batch still pending under ``owner``'s unexpired lease (one cancelled
    meanwhile, or taken over, is not ours to send)."""
    return set(
        await session.scalars(
            select(OutboxEffect.id).where(
                OutboxEffect.id.in_([e.id for e in effects]),
                OUTBOX.keyed(OUTBOX_PENDING),
                OutboxEffect.lease_owner == owner,
                # An expired lease is no longer ours, even before another deliverer takes it.
                OutboxEffect.next_attempt_at > at,
            )
        )
    )
