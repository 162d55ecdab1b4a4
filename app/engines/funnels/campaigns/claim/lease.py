"""A campaign's sending lease (``lease_owner``/``lease_until``): one sender at a time. A sender
takes it when it is free, expired or already its own, renews it with every checkpoint it commits
(:func:`~app.engines.funnels.campaigns.records.outcomes.confirm`) and gives it back when its
time slice is over; a sender that lost it stops."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, update

from app.db.session import Database
from app.engines.funnels.campaigns.models import SENDING, Campaign
from app.engines.funnels.campaigns.states import CAMPAIGNS
from app.scheduling.claim import Claim

CAMPAIGN = Claim(
    table=Campaign.__table__,  # type: ignore[arg-type]
    due=(
        f"id = :campaign_id AND {CAMPAIGNS.where_keyed(SENDING)}"
        " AND (lease_owner IS NULL OR lease_owner = :owner OR lease_until < :now)"
    ),
    order_by="id",
    returning=("id",),
    owner="lease_owner",
    expires="lease_until",
    params={"campaign_id": Integer()},
)
"""One campaign's sending lease: one sender at a time; its checkpoint renews it."""


async def take(
    db: Database, campaign_id: int, *, owner: str, lease_seconds: int, now: datetime
) -> Campaign | None:
    """Take the campaign's lease (free, expired, or already ``owner``'s); the campaign, or
    ``None`` when another sender holds it or it is not sending."""
    async with db.write() as uow:
        claimed = await CAMPAIGN.take_in(
            uow.session,
            now=now,
            limit=1,
            owner=owner,
            lease_seconds=lease_seconds,
            campaign_id=campaign_id,
        )
        if not claimed:
            return None
        return await uow.session.get(Campaign, campaign_id)


async def release(db: Database, campaign_id: int, owner: str) -> None:
    """Give the lease back, if ``owner`` still holds it, for the next sender job."""
    async with db.write() as uow:
        await uow.session.execute(
            update(Campaign)
            .where(Campaign.id == campaign_id, Campaign.lease_owner == owner)
            .values(lease_owner=None, lease_until=None)
        )
