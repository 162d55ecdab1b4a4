"""The campaigns sweep's reads over every workspace: campaigns whose time has come, and sending
campaigns without a live sender (never had one, or its lease expired); and its one write, a due
campaign whose audience cannot be taken turned back into a draft."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, update

from app.db.session import ReadSession, WriteSession
from app.engines.funnels.campaigns.models import DRAFT, SCHEDULED, SENDING, Campaign
from app.engines.funnels.campaigns.states import CAMPAIGNS


async def due_to_start(session: ReadSession, now: datetime) -> list[int]:
    """Scheduled campaigns whose send time has come: their audience snapshot starts."""
    return list(
        await session.scalars(
            select(Campaign.id).where(Campaign.status == SCHEDULED, Campaign.send_at <= now)
        )
    )


async def without_sender(session: ReadSession, now: datetime) -> list[int]:
    """Sending campaigns (their audience complete) that no live sender holds."""
    return list(
        await session.scalars(
            select(Campaign.id).where(
                Campaign.status == SENDING,
                or_(Campaign.lease_owner.is_(None), Campaign.lease_until < now),
            )
        )
    )


async def unschedule(session: WriteSession, campaign_id: int, now: datetime) -> None:
    """A scheduled campaign back to a draft (its audience breaks a rule: scheduling it again
    names the problem)."""
    await session.execute(
        CAMPAIGNS.transition(
            update(Campaign).where(Campaign.id == campaign_id), DRAFT, from_=(SCHEDULED,)
        ).values(send_at=None, updated_at=now)
    )
