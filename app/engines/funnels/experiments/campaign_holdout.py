"""A campaign's holdout: when its audience is snapshotted, the contacts in its control share
(SHA-256 of the campaign and the contact, like a funnel's) are inserted as recipients already
``skipped`` with the detail ``holdout`` — counted in the audience, never sent to. The report sets
them against everyone else in the audience on the holdout's goal event, counted from the moment
the snapshot was taken."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.funnels.campaigns.models import Campaign, Recipient
from app.engines.funnels.campaigns.recipient_states import R_SKIPPED, RECIPIENTS
from app.engines.funnels.definitions.funnel_settings import Holdout
from app.engines.funnels.experiments import stats
from app.engines.funnels.experiments.assign import HOLDOUT_SCALE
from app.engines.funnels.experiments.holdout import HOLDOUT_REASON
from app.engines.funnels.experiments.report import GroupResult, HoldoutReport, _events, _group


def _holdout(campaign: Campaign) -> Holdout | None:
    import msgspec

    if not campaign.holdout:
        return None
    return msgspec.convert(campaign.holdout, Holdout)


def campaign_held_out(campaign_id: int, contact_id: int, percent: float) -> bool:
    digest = hashlib.sha256(f"holdout:campaign:{campaign_id}:{contact_id}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") % HOLDOUT_SCALE
    return point < round(percent * HOLDOUT_SCALE / 100)


def held_back(campaign: Campaign, contact_id: int) -> dict[str, Any]:
    """The recipient row's changes when the contact is in the campaign's control share."""
    holdout = _holdout(campaign)
    if holdout is None or not campaign_held_out(campaign.id, contact_id, holdout.percent):
        return {}
    return {**RECIPIENTS.create(R_SKIPPED), "detail": HOLDOUT_REASON}


async def campaign_holdout_report(session: ReadSession, campaign: Campaign) -> HoldoutReport | None:
    """Control against the rest of the audience (``None`` when the campaign has no holdout)."""
    holdout = _holdout(campaign)
    if holdout is None:
        return None
    rows = await session.execute(
        select(Recipient.contact_id, Recipient.detail).where(Recipient.campaign_id == campaign.id)
    )
    control = {cid for cid, detail in rows if detail == HOLDOUT_REASON}
    everyone = set(
        await session.scalars(
            select(Recipient.contact_id).where(Recipient.campaign_id == campaign.id)
        )
    )
    start: datetime | None = campaign.materialised_at
    converted: set[int] = set()
    if start is not None:
        end = start + timedelta(days=holdout.window_days)
        async for contact_id, at, _ in _events(
            session, campaign.workspace_id, holdout.goal_event, everyone
        ):
            if start <= at <= end:
                converted.add(contact_id)
    treated = everyone - control
    c = GroupResult(**_group("control", len(control), len(control & converted), 0, 0.95))
    t = GroupResult(**_group("sent the campaign", len(treated), len(treated & converted), 0, 0.95))
    test = stats.two_proportion_z(t.converted, t.entered, c.converted, c.entered)
    return HoldoutReport(
        percent=holdout.percent,
        goal_event=holdout.goal_event,
        window_days=holdout.window_days,
        control=c,
        treated=t,
        lift=stats.lift(t.rate, c.rate),
        p_value=None if test is None else test.p_value,
    )
