"""What the campaign sender writes of its recipients: the ones the consent gate held back,
skipped with its reason; each group's outcomes with the checkpoint moved past every settled
recipient (and the lease renewed) at once; the campaign done once nobody is left.
Every write is guarded by the sender's lease, so a sender that lost it writes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update

from app.db.column_arrays import ColumnArrays
from app.db.lone_statement import write_alone
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


# A group of sends and nothing else (or none: a renewal), the common group, as one statement while
# the sender holds the campaign: the campaign's row is locked first (so the lease cannot change
# hands during the statement), the recipients are marked sent, and the checkpoint moves past every
# settled recipient. The statement's snapshot still sees this group's recipients as pending, so
# the checkpoint's subquery leaves them out by their numbers. No row back: the lease was lost and
# nothing was written. Written alone it is one round trip where the transaction takes four.
_SENT_ALONE = f"""
    WITH ours AS (
        SELECT id FROM campaigns WHERE id = $1 AND lease_owner = $2 FOR UPDATE
    ), settled AS (
        UPDATE campaign_recipients SET {RECIPIENTS.set_sql(R_SENT)}, sent_at = $3
        WHERE campaign_id = (SELECT id FROM ours) AND seq = ANY($4::integer[])
          AND {RECIPIENTS.where(R_PENDING)}
    )
    UPDATE campaigns SET
        checkpoint = coalesce((
            SELECT min(seq) - 1 FROM campaign_recipients
            WHERE campaign_id = $1 AND {RECIPIENTS.where(R_PENDING)}
              AND NOT (seq = ANY($4::integer[]))
        ), audience_size),
        lease_until = $5, updated_at = $3
    WHERE id = (SELECT id FROM ours)
    RETURNING checkpoint, status
"""  # noqa: S608 - only the state machines' constants are interpolated


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
    recipient, at once: one statement for a group of sends on PostgreSQL, a transaction
    otherwise. False when the lease was lost (another sender took
    over): then nothing is written; or when the campaign was cancelled meanwhile: then the
    outcomes are written (those messages went out) and the sender stops."""
    if all(status == R_SENT for status, _ in outcome.values()) and not (release and release[1]):
        rows = await write_alone(
            db, lambda: _sent_alone(campaign, outcome, at, owner, lease_seconds)
        )
        if rows is not None:
            return _renewed(campaign, rows[0] if rows else None)
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
    return _renewed(campaign, renewed)


def _renewed(campaign: Campaign, renewed: Sequence[Any] | None) -> bool:
    """Whether the sender goes on: the lease was renewed (a row came back: the campaign's new
    checkpoint and status) and the campaign is still sending."""
    if renewed is None:
        return False
    campaign.checkpoint = int(renewed[0])
    return bool(renewed[1] == SENDING)


def _sent_alone(
    campaign: Campaign,
    outcome: dict[int, tuple[str, str]],
    at: datetime,
    owner: str,
    lease_seconds: int,
) -> ColumnArrays:
    at = at.astimezone(UTC)
    return ColumnArrays(
        _SENT_ALONE,
        (campaign.id, owner, at, list(outcome), at + timedelta(seconds=lease_seconds)),
    )


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
