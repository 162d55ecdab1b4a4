"""Stored results pages are kept ``RT_SNAPSHOT_RETENTION_DAYS`` (RT-70): an hourly sweep deletes
older ones in bounded batches. Positions, URLs and feature types stay on the results themselves."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select

from app.db.dialect import row_count
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.explain_models import SerpSnapshot
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import Every, Sweep

BATCH = 5000
MAX_BATCHES = 20


async def purge_snapshots(deps: RankTrackingDeps, now: datetime) -> int:
    """Delete the pages older than the retention (all of them when it is 0); how many went."""
    days = deps.settings.ranktracking.snapshot_retention_days
    cutoff = now - timedelta(days=days) if days > 0 else now + timedelta(seconds=1)
    gone = 0
    for _ in range(MAX_BATCHES):
        async with deps.db.write() as uow:
            batch = (
                select(SerpSnapshot.result_id).where(SerpSnapshot.created_at < cutoff).limit(BATCH)
            )
            result = await uow.session.execute(
                delete(SerpSnapshot).where(SerpSnapshot.result_id.in_(batch.scalar_subquery()))
            )
            removed = row_count(result)
        gone += removed
        if removed < BATCH:
            break
    return gone


async def retention_tick(ctx: JobContext, tick: datetime) -> None:
    await purge_snapshots(RankTrackingDeps.of(ctx), ctx.clock.now())


SNAPSHOT_RETENTION_SWEEP = Sweep("ranktracking.snapshot_retention", Every(3600), retention_tick)
