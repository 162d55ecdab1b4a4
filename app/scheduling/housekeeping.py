"""Platform sweeps: queue gauges, expired-lease recovery, purging of old finished jobs and of
audit entries past their retention."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.platform.audit.retention import purge_audit, retention_cutoff
from app.scheduling.attempts import purge_attempts
from app.scheduling.jobs import JobContext
from app.scheduling.metrics import JOBS_DEAD, JOBS_QUEUED, JOBS_RUNNING
from app.scheduling.sweeper import EVERY_10_SECONDS, HOURLY_AT_20, Sweep


async def refresh_queue_gauges(ctx: JobContext, tick: datetime) -> None:
    stats = await ctx.queue.stats()
    JOBS_QUEUED.set(stats.queued)
    JOBS_RUNNING.set(stats.running)
    JOBS_DEAD.set(stats.dead)


async def purge_finished_jobs(ctx: JobContext, tick: datetime) -> None:
    retention = timedelta(hours=ctx.settings.queue.done_retention_hours)
    await ctx.queue.housekeep(tick - retention)
    await purge_attempts(ctx.db, tick - retention)


async def purge_old_audit_entries(ctx: JobContext, tick: datetime) -> None:
    days = ctx.settings.security.audit_retention_days
    await purge_audit(ctx.db, retention_cutoff(tick, days))


HOUSEKEEPING_SWEEPS = [
    Sweep("platform.queue_gauges", EVERY_10_SECONDS, refresh_queue_gauges, honours_stop=False),
    Sweep("platform.purge_jobs", HOURLY_AT_20, purge_finished_jobs, honours_stop=False),
    Sweep("platform.purge_audit", HOURLY_AT_20, purge_old_audit_entries, honours_stop=False),
]
