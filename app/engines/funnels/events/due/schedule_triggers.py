"""``schedule`` triggers: recurring entries ("every Monday at 9", "every 7 days at 8:30").

At each occurrence (a local wall-clock time in the trigger's time zone) everyone matching the
trigger's segment — and the funnel's entry predicate (FN-12) — is offered entry. An occurrence is
claimed once by inserting its row (contact 0) with ``ON CONFLICT DO NOTHING``, so several sweeps
or processes fire it once. Occurrences before the version was published never fire; one missed by
up to a day (a stopped server) fires late, older ones are skipped.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from app.db.dialect import insert
from app.db.session import UnitOfWork
from app.engines.funnels.definitions.graph import Schedule, graph_for_version
from app.engines.funnels.events.due.date_triggers import fire_date_triggers
from app.engines.funnels.events.ingest import INGEST, IngestPayload
from app.engines.funnels.events.models import TriggerFire
from app.engines.funnels.events.work.segment_triggers import (
    evaluate_segments,
    live_versions,
    trigger_key,
)
from app.engines.funnels.jobs import wake_runners
from app.engines.funnels.models import Funnel, FunnelVersion
from app.engines.funnels.runs.due.enrolment import start_enrolment
from app.scheduling.jobs import JobContext, JobPayload, JobSpec
from app.scheduling.queue import JobQueue
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep, tick_key
from app.scheduling.zones import local_to_utc, zone_or_utc

LOOKBACK = timedelta(days=1)


def latest_occurrence(trigger: Schedule, anchor: datetime, now: datetime) -> datetime | None:
    """The most recent occurrence at or before ``now`` and not before ``anchor`` (publication)."""
    tz = zone_or_utc(trigger.timezone)
    local_today = now.astimezone(tz).date()
    anchor_day = anchor.astimezone(tz).date()
    every = max(1, trigger.every_days)
    for back in range(0, 8 if trigger.weekdays else every + 1):
        day = local_today - timedelta(days=back)
        if trigger.weekdays:
            if day.weekday() not in trigger.weekdays:
                continue
        elif (day - anchor_day).days % every:
            continue
        at = local_to_utc(day, time(trigger.hour, trigger.minute), tz)
        if at <= now:
            return at if at >= anchor else None
    return None


async def fire_schedules(
    uow: UnitOfWork, queue: JobQueue, *, now: datetime, chunk_items: int
) -> int:
    """Fire the due schedules; runs started now (a segment larger than ``chunk_items`` enters
    the rest through a bulk job, see :mod:`.enrolment`)."""
    started = 0
    for funnel, version in await live_versions(uow.session):
        graph = graph_for_version(version.id, version.definition)
        for trigger in graph.definition.triggers:
            if isinstance(trigger, Schedule):
                started += await _fire(uow, queue, funnel, version, trigger, now, chunk_items)
    return started


async def _fire(
    uow: UnitOfWork,
    queue: JobQueue,
    funnel: Funnel,
    version: FunnelVersion,
    trigger: Schedule,
    now: datetime,
    chunk_items: int,
) -> int:
    session = uow.session
    at = latest_occurrence(trigger, version.published_at, now)
    if at is None or now - at >= LOOKBACK:
        return 0
    claimed = await session.scalar(
        insert(session, TriggerFire)
        .values(
            funnel_id=funnel.id,
            trigger_key=trigger_key(trigger),
            contact_id=0,
            occurrence=at.isoformat(),
            fired_at=now,
        )
        .on_conflict_do_nothing()
        .returning(TriggerFire.funnel_id)
    )
    if claimed is None:
        return 0
    entered = await start_enrolment(
        uow,
        queue,
        version,
        now=now,
        contact_ids=None,
        predicate=trigger.segment,
        chunk_items=chunk_items,
    )
    return entered.started


# -- the sweep of time-based triggers ----------------------------------------------------------


class TimeTriggersPayload(JobPayload, frozen=True):
    pass


async def run_time_triggers(ctx: JobContext, payload: TimeTriggersPayload) -> None:
    """Fire due schedules and date fields, and re-evaluate every segment_enter trigger."""
    now = ctx.clock.now()
    async with ctx.db.write() as uow:
        started = await fire_schedules(
            uow, ctx.queue, now=now, chunk_items=ctx.settings.bulk.chunk_items
        )
        started += await fire_date_triggers(uow.session, now=now)
        started += await evaluate_segments(uow.session, now=now)
    if started:
        await wake_runners(ctx)


TIME_TRIGGERS = JobSpec(
    "funnels.time_triggers",
    TimeTriggersPayload,
    run_time_triggers,
    max_tries=3,
    timeout_seconds=300,
)


async def tick(ctx: JobContext, at: datetime) -> None:
    """Every 10 seconds: the time-based triggers, and a backstop pass over stored events (the
    request that stored them asks for processing too; this catches a lost request)."""
    await ctx.queue.enqueue(
        None, TIME_TRIGGERS, TimeTriggersPayload(), job_id=tick_key("funnels.time", 0, at)
    )
    await ctx.queue.enqueue(None, INGEST, IngestPayload(), job_id=tick_key("funnels.ingest", 0, at))


SWEEPS = [Sweep("funnels.triggers", EVERY_10_SECONDS, tick)]
JOBS: list[JobSpec[Any]] = [TIME_TRIGGERS, INGEST]
