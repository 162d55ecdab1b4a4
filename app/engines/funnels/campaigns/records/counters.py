"""What a person reads of a campaign's send: its recipients page by page, and the counters,
recomputed from the recipients' send records and the delivery events on every read (FN-29),
never stored."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from app.db import keyset
from app.db.session import ReadSession
from app.engines.funnels.campaigns.models import (
    R_FAILED,
    R_PENDING,
    R_SENT,
    R_SKIPPED,
    CampaignEvent,
    Recipient,
)
from app.engines.funnels.campaigns.recipient_states import RECIPIENT_STATUSES
from app.errors import ValidationFailed


async def list_recipients(
    session: ReadSession,
    campaign_id: int,
    *,
    status: str | None = None,
    after: int | None = None,
    limit: int = 50,
) -> list[Recipient]:
    """A page of the campaign's recipients in ``seq`` order, after ``after``."""
    if status is not None and status not in RECIPIENT_STATUSES:
        raise ValidationFailed.field("status", f"one of {', '.join(RECIPIENT_STATUSES)}")
    stmt = select(Recipient).where(Recipient.campaign_id == campaign_id)
    if status is not None:
        stmt = stmt.where(Recipient.status == status)
    if after is not None:
        stmt = stmt.where(keyset.after(Recipient.seq, after))
    return list(await session.scalars(stmt.order_by(Recipient.seq).limit(limit)))


@dataclass(frozen=True, slots=True)
class Counters:
    audience: int
    pending: int
    sent: int
    skipped: int
    failed: int
    delivered: int
    opened: int
    clicked: int
    bounced: int
    complained: int
    unsubscribed: int


async def counters(session: ReadSession, campaign_id: int) -> Counters:
    """Recomputed from the recipients' send records and the delivery events, never stored."""
    by_status = {
        status: int(n)
        for status, n in (
            await session.execute(
                select(Recipient.status, func.count())
                .where(Recipient.campaign_id == campaign_id)
                .group_by(Recipient.status)
            )
        ).all()
    }
    by_kind = {
        kind: int(n)
        for kind, n in (
            await session.execute(
                select(CampaignEvent.kind, func.count(func.distinct(CampaignEvent.seq)))
                .where(CampaignEvent.campaign_id == campaign_id)
                .group_by(CampaignEvent.kind)
            )
        ).all()
    }
    # An open is implied by a click (images may be blocked while the link was followed).
    opened = await session.scalar(
        select(func.count(func.distinct(CampaignEvent.seq))).where(
            CampaignEvent.campaign_id == campaign_id,
            CampaignEvent.kind.in_(("opened", "clicked")),
        )
    )
    return Counters(
        audience=sum(by_status.values()),
        pending=by_status.get(R_PENDING, 0),
        sent=by_status.get(R_SENT, 0),
        skipped=by_status.get(R_SKIPPED, 0),
        failed=by_status.get(R_FAILED, 0),
        delivered=by_kind.get("delivered", 0),
        opened=int(opened or 0),
        clicked=by_kind.get("clicked", 0),
        bounced=by_kind.get("bounced", 0),
        complained=by_kind.get("complained", 0),
        unsubscribed=by_kind.get("unsubscribed", 0),
    )


def progress(counts: Counters) -> float:
    """Share of the audience settled (sent, skipped or failed), 0..1."""
    if counts.audience == 0:
        return 1.0
    return (counts.audience - counts.pending) / counts.audience
