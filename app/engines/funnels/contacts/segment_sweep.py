"""The saved segments' count over time (FN-73): an hourly sweep counts every segment not yet
counted today, so each has one count a day even when a tick is missed."""

from __future__ import annotations

from datetime import datetime

from app.engines.funnels.contacts.saved_segments import take_daily_counts
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import HourlyAt, Sweep


async def tick(ctx: JobContext, at: datetime) -> None:
    async with ctx.db.write() as uow:
        await take_daily_counts(uow.session, ctx.clock.now())


SWEEPS = [Sweep("funnels.segment_counts", HourlyAt(40), tick)]
