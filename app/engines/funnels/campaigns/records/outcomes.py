"""What the campaign sender writes of its recipients: the ones the consent gate held back,
skipped with its reason; each group's outcomes with the checkpoint moved past every settled
recipient (and the lease renewed) in one transaction; the campaign done once nobody is left.
Every write is guarded by the sender's lease, so a sender that lost it writes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select, update

from app.db.session import Database, WriteSession
from app.engines.funnels.campaigns.models import (
    DONE,
    R_FAILED,
    R_PENDING,
    R_SENT,
    R_SKIPPED,
    SENDING,
    Campaign,
    Recipient,
)
from app.engines.funnels.campaigns.recipient_states import RECIPIENTS
from app.engines.funnels.campaigns.states import CAMPAIGNS
from app.engines.funnels.outbox.work import frequency

Release = tuple[dict[int, frequency.Cap], list[frequency.Want], datetime]
"""Frequency-cap slots to give back: the workspace's caps, the slots, when they were taken."""


class _LeaseLost(Exception):
    """Raised inside a confirmation to roll it back: another sender holds the campaign."""


async def record_skips(
    session: WriteSession, campaign: Campaign, owner: str, skipped: dict[int, str]
) -> None:
    """Mark the recipients the consent gate held back skipped, each with its reason, while
    ``owner`` holds the campaign (a sender that lost it writes nothing)."""
    ours = (
        select(Campaign.id)
        .where(Campaign.id == campaign.id, Campaign.lease_owner == owner)
        .exists()
    )
    by_reason: dict[str, list[int]] = {}
    for seq, reason in skipped.items():
        by_reason.setdefault(reason[:2000], []).append(seq)
    for reason, seqs in by_reason.items():
        await session.execute(
            RECIPIENTS.transition(
                update(Recipient).where(
                    Recipient.campaign_id == campaign.id, Recipient.seq.in_(seqs), ours
                ),
                R_SKIPPED,
                from_=(R_PENDING,),
            ).values(detail=reason)
        )


async def _settle(
    session: WriteSession, campaign: Campaign, outcome: dict[int, tuple[str, str]], at: datetime
) -> None:
    """Each pending recipient of ``outcome`` sent, skipped or failed (one statement a status)."""
    for status in (R_SENT, R_SKIPPED, R_FAILED):
        seqs = [seq for seq, (st, _) in outcome.items() if st == status]
        if seqs:
            await session.execute(
                RECIPIENTS.transition(
                    update(Recipient).where(
                        Recipient.campaign_id == campaign.id, Recipient.seq.in_(seqs)
                    ),
                    status,
                    from_=(R_PENDING,),
                ).values(sent_at=at if status == R_SENT else None)
            )


async def confirm(
    db: Database,
    campaign: Campaign,
    outcome: dict[int, tuple[str, str]],
    at: datetime,
    *,
    owner: str,
    lease_seconds: int,
    release: Release | None = None,
) -> bool:
    """Commit outcomes, renew the lease and move the checkpoint past every settled
    recipient, in one transaction. False when the lease was lost (another sender took
    over): then nothing is written; or when the campaign was cancelled meanwhile: then the
    outcomes are written (those messages went out) and the sender stops."""
    try:
        async with db.write() as uow:
            session = uow.session
            if release is not None and release[1]:
                # Frequency-cap slots of messages that did not go out are given back.
                await frequency.release(session, *release)
            await _settle(session, campaign, outcome, at)
            first_pending = (
                select(func.min(Recipient.seq) - 1)
                .where(Recipient.campaign_id == campaign.id, Recipient.status == R_PENDING)
                .scalar_subquery()
            )
            renewed = (
                await session.execute(
                    update(Campaign)
                    .where(Campaign.id == campaign.id, Campaign.lease_owner == owner)
                    .values(
                        checkpoint=func.coalesce(first_pending, Campaign.audience_size),
                        lease_until=at + timedelta(seconds=lease_seconds),
                        updated_at=at,
                    )
                    .returning(Campaign.checkpoint, Campaign.status)
                )
            ).first()
            if renewed is None:
                raise _LeaseLost
    except _LeaseLost:
        return False
    campaign.checkpoint = int(renewed[0])
    return renewed[1] == SENDING


async def finish(db: Database, campaign: Campaign, owner: str, at: datetime) -> None:
    """The campaign is done: every recipient settled, the lease given back (a campaign
    cancelled meanwhile stays cancelled)."""
    async with db.write() as uow:
        await uow.session.execute(
            CAMPAIGNS.transition(
                update(Campaign).where(Campaign.id == campaign.id, Campaign.lease_owner == owner),
                DONE,
                from_=(SENDING,),
            ).values(
                finished_at=at,
                checkpoint=campaign.audience_size,
                lease_owner=None,
                lease_until=None,
                updated_at=at,
            )
        )
