"""The recurring dispatcher (RT-30): every hour at minute 20 UTC, a bounded batch of due active
schedules, oldest due first, each admitted in its own unit of work.

Schedules left over when the batch is full stay due and show "next run pending" until a later sweep
(a batch backlog is visible, never silent). A schedule whose admission raised is logged and stays due.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from app.engines.ranktracking.admission import RECURRING, Launch
from app.engines.ranktracking.env import Env
from app.engines.ranktracking.handoff import admit_and_send
from app.engines.ranktracking.models import ACTIVE, Schedule
from app.engines.ranktracking.pricing import STANDARD
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import HOURLY_AT_20, Sweep

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DispatchReport:
    selected: int = 0
    launched_runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: int = 0


async def due_schedule_ids(env: Env, now: datetime, limit: int) -> list[int]:
    async with env.db.read() as session:
        rows = await session.execute(
            select(Schedule.id)
            .where(Schedule.status == ACTIVE, Schedule.next_due_at <= now)
            .order_by(Schedule.next_due_at, Schedule.id)
            .limit(limit)
        )
        return list(rows.scalars())


async def dispatch_due(
    env: Env, now: datetime, *, due_by: datetime | None = None, limit: int | None = None
) -> DispatchReport:
    """Admit one bounded batch of the active schedules due by ``due_by`` (the tick; default
    ``now``). A tick that runs late still takes only what was due at its scheduled time."""
    rt = env.settings.ranktracking
    ids = await due_schedule_ids(env, min(due_by or now, now), limit or rt.dispatch_batch)
    report = DispatchReport(selected=len(ids))
    # SQLite serialises writers anyway; PostgreSQL admits several schedules at once (they meet
    # only on their organisation's balance row).
    gate = asyncio.Semaphore(max(1, rt.dispatch_concurrency) if env.db.is_postgres else 1)

    async def one(schedule_id: int) -> Launch | None:
        async with gate:
            try:
                return await admit_and_send(
                    env, schedule_id, trigger=RECURRING, queue=STANDARD, now=now
                )
            except Exception:
                log.exception("admission of schedule %s failed; it stays due", schedule_id)
                return None

    for launch in await asyncio.gather(*(one(i) for i in ids)):
        if launch is None:
            report.errors += 1
            continue
        report.launched_runs += launch.launched
        key = launch.reason or "launched"
        report.outcomes[key] = report.outcomes.get(key, 0) + 1
    log.info(
        "position tracking sweep",
        extra={"selected": report.selected, "runs": report.launched_runs, **report.outcomes},
    )
    return report


async def dispatch_tick(ctx: JobContext, tick: datetime) -> None:
    await dispatch_due(ctx, ctx.clock.now(), due_by=tick)


DISPATCH_SWEEP = Sweep("ranktracking.dispatch", HOURLY_AT_20, dispatch_tick)
