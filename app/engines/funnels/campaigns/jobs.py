"""Campaign jobs: every 10 seconds due campaigns get their audience snapshot (its first chunk at
once, the rest as a bulk job) and a sender job once it is complete; a campaign whose sender died
(lease expired) gets a new sender job, which resumes it."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.engines.funnels.campaigns.due.audience import (
    AUDIENCE_JOB,
    AlreadyMaterialised,
    start_materialising,
)
from app.engines.funnels.campaigns.due.campaigns import due_to_start, unschedule, without_sender
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.consent import gate
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.jobs import mail_domain
from app.errors import ValidationFailed
from app.platform.models import Workspace
from app.platform.service import webhook_secret
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep, tick_key
from app.scheduling.worker import worker_identity

log = logging.getLogger(__name__)

SEND_SLICE_SECONDS = 50.0
"""One sender job sends for at most this long, then hands over to the next tick's job."""


class CampaignPayload(JobPayload, frozen=True):
    campaign_id: int


async def start_due(ctx: JobContext, now: datetime) -> list[int]:
    """Start the audience snapshot of every campaign whose time has come; ids of campaigns that
    need a sender (their audience complete, and no live sender)."""
    async with ctx.db.read() as session:
        due = await due_to_start(session, now)
    for campaign_id in due:
        try:
            async with ctx.db.write() as uow:
                await start_materialising(
                    uow, ctx.queue, campaign_id, now, chunk_items=ctx.settings.bulk.chunk_items
                )
        except AlreadyMaterialised:
            continue  # another process started it a moment ago
        except ValidationFailed as exc:
            # An audience stored before audiences were checked: back to a draft, so the others
            # due go on and scheduling it again names the problem.
            async with ctx.db.write() as uow:
                await unschedule(uow.session, campaign_id, now)
            log.warning(
                "campaign %s is a draft again, its audience breaks a rule: %s", campaign_id, exc
            )
    async with ctx.db.read() as session:
        return await without_sender(session, now)


async def tick(ctx: JobContext, at: datetime) -> None:
    for campaign_id in await start_due(ctx, ctx.clock.now()):
        await ctx.queue.enqueue(
            None,
            SEND,
            CampaignPayload(campaign_id=campaign_id),
            job_id=tick_key("funnels.campaign", campaign_id, at),
        )


async def send(ctx: JobContext, payload: CampaignPayload) -> None:
    async with ctx.db.read() as session:
        workspace = await session.scalar(
            select(Workspace)
            .join(Campaign, Campaign.workspace_id == Workspace.id)
            .where(Campaign.id == payload.campaign_id)
        )
    if workspace is None:
        return
    tracking = Tracking(ctx.settings.web.public_url, webhook_secret(ctx.secrets, workspace))
    pool = SmtpPool(ctx.settings.mail, ctx.settings.funnels.campaign_in_flight, ctx.clock)
    sender = CampaignSender(
        ctx.db,
        pool,
        owner=f"{worker_identity()}:{ctx.job_id or 'direct'}"[:100],
        domain=mail_domain(ctx.settings.mail),
        in_flight=ctx.settings.funnels.campaign_in_flight,
        tracking=tracking,
        signing=tracking,
        mailto_address=ctx.settings.mail.unsubscribe_mailbox,
        address_key=gate.address_key(ctx.secrets),
    )
    try:
        await send_until_done(
            sender, payload.campaign_id, ctx.clock, max_seconds=SEND_SLICE_SECONDS
        )
    finally:
        await pool.aclose()


SEND = JobSpec(
    "funnels.campaign_send",
    CampaignPayload,
    send,
    max_tries=3,
    timeout_seconds=120,
    owner=OwnedBy("campaign_id", Campaign),
)
JOBS: list[JobSpec[Any]] = [SEND, AUDIENCE_JOB]
SWEEPS = [Sweep("funnels.campaigns", EVERY_10_SECONDS, tick)]
