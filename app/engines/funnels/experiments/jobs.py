"""The hourly sweep that records automatic winners (experiments with ``auto_winner`` whose
verdict is in). Hourly is enough: a verdict needs a minimum sample, which takes days."""

from __future__ import annotations

from datetime import datetime

from app.engines.funnels.experiments.winners import decide_all
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import HOURLY_AT_20, Sweep


async def decide_winners(ctx: JobContext, at: datetime) -> None:
    async with ctx.db.write() as uow:
        await decide_all(uow.session, now=ctx.clock.now())


SWEEPS = [Sweep("funnels.experiment_verdicts", HOURLY_AT_20, decide_winners)]
