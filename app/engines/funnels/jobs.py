"""How the engine runs inside ``serve`` and ``worker``: a 10-second sweep enqueues, keyed by
its tick, the matcher, the goal watcher, ``FUNNEL_RUNNER_TASKS`` runner jobs and
``FUNNEL_DELIVER_TASKS`` deliverer jobs. Each runner or deliverer job drains due work in batches
for up to ``FUNNEL_DRAIN_SECONDS``; any worker process (``python -m app worker``) runs them, so
concurrency scales with worker processes and tasks. The runner and the deliverer the jobs drive
are the process's own, built once with the engine's dependencies (:mod:`app.engines.funnels.deps`).
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.outbox.work import frequency
from app.engines.funnels.runs.due.goals import watch_goals
from app.scheduling.jobs import JobContext, JobPayload, JobSpec
from app.scheduling.queue import QueuedJob
from app.scheduling.sweeper import EVERY_10_SECONDS, HOURLY_AT_20, Sweep, tick_key
from app.scheduling.worker import worker_identity
from app.settings import FunnelSettings, MailSettings

MAX_BATCHES_PER_JOB = 1000
DELIVER_LOOPS = 2
"""Batches one deliverer job has in hand at once (see :func:`deliver`)."""


class Shard(JobPayload, frozen=True):
    shard: int = 0


def runners(fs: FunnelSettings) -> list[QueuedJob]:
    """Every runner shard, to queue when runs became due now: a wave of new runs is then shared
    by the worker processes instead of drained by one job in one of them."""
    return [(ADVANCE, Shard(shard=i), None) for i in range(max(1, fs.runner_tasks))]


async def wake_runners(ctx: JobContext) -> None:
    """Runs became due: start the runners now rather than at the next tick."""
    await ctx.queue.enqueue_many(None, runners(ctx.settings.funnels))


def mail_domain(mail: MailSettings) -> str:
    return mail.from_address.rpartition("@")[2] or "localhost"


async def advance(ctx: JobContext, payload: Shard) -> None:
    """Execute due runs until none are due or the drain time is used up (the process's runner,
    over the plugin's node executors)."""
    runner = ctx.resources.require(FunnelsDeps).runner
    started = ctx.clock.monotonic()
    effects = 0  # created since a deliverer was last queued
    delivering = False
    for _ in range(MAX_BATCHES_PER_JOB):
        result = await runner.run_batch(owner=_owner(ctx), now=ctx.clock.now())
        effects += result.effects
        if effects and not delivering:
            # Deliver promptly, beside the rest of the drain, rather than after it or at the
            # next tick: the first batch's mail goes out while later batches run.
            await ctx.queue.enqueue(None, DELIVER, Shard(shard=payload.shard))
            delivering, effects = True, 0
        if (
            result.leased == 0
            or ctx.clock.monotonic() - started > ctx.settings.funnels.drain_seconds
        ):
            break
    if effects:
        # Created after the deliverer was queued: it may have found nothing due and ended.
        await ctx.queue.enqueue(None, DELIVER, Shard(shard=payload.shard))


async def deliver(ctx: JobContext, payload: Shard) -> None:
    """Deliver due effects until none are due or the drain time is used up (the process's
    deliverer, over the plugin's channels)."""
    deliverer = ctx.resources.require(FunnelsDeps).deliverer
    started = ctx.clock.monotonic()

    async def drain() -> None:
        for _ in range(MAX_BATCHES_PER_JOB // DELIVER_LOOPS):
            result = await deliverer.run_batch(owner=_owner(ctx), now=ctx.clock.now)
            if (
                result.leased == 0
                or ctx.clock.monotonic() - started > ctx.settings.funnels.drain_seconds
            ):
                break

    # Two batches at a time: while one leases and reads its next batch, or waits for the last
    # sends of its current one, the other keeps the send slots busy. The slots are the
    # deliverer's, shared by every batch of the process, so no more messages are on the wire
    # (or unrecorded) than with one batch at a time.
    async with asyncio.TaskGroup() as group:  # a failure cancels the other loop
        for _ in range(DELIVER_LOOPS):
            group.create_task(drain())


def _owner(ctx: JobContext) -> str:
    return f"{worker_identity()}:{ctx.job_id or 'direct'}"[:100]


async def match(ctx: JobContext, payload: Shard) -> None:
    started = 0
    for _ in range(MAX_BATCHES_PER_JOB):
        events, entered = await match_events(
            ctx.db, now=ctx.clock.now(), segments=evaluate_segments
        )
        started += entered
        if events == 0:
            break
    if started:
        await wake_runners(ctx)


async def goals(ctx: JobContext, payload: Shard) -> None:
    if await watch_goals(ctx.db, now=ctx.clock.now()):
        await wake_runners(ctx)


ADVANCE = JobSpec("funnels.advance", Shard, advance, max_tries=3, timeout_seconds=120)
DELIVER = JobSpec("funnels.deliver", Shard, deliver, max_tries=3, timeout_seconds=300)
MATCH = JobSpec("funnels.match", Shard, match, max_tries=5, timeout_seconds=120)
GOALS = JobSpec("funnels.goals", Shard, goals, max_tries=3, timeout_seconds=120)
JOBS = [ADVANCE, DELIVER, MATCH, GOALS]


async def tick(ctx: JobContext, at: datetime) -> None:
    """Every 10 seconds: one matcher, one goal watcher, N runners, M deliverers (keyed by the
    tick, so two processes sweeping the same tick enqueue them once), queued together: one
    transaction a tick, not one a job."""
    fs = ctx.settings.funnels
    jobs: list[QueuedJob] = [
        (MATCH, Shard(), tick_key("funnels.match", 0, at)),
        (GOALS, Shard(), tick_key("funnels.goals", 0, at)),
    ]
    jobs += [
        (ADVANCE, Shard(shard=i), tick_key("funnels.advance", i, at))
        for i in range(max(1, fs.runner_tasks))
    ]
    jobs += [
        (DELIVER, Shard(shard=i), tick_key("funnels.deliver", i, at))
        for i in range(max(1, fs.deliver_tasks))
    ]
    await ctx.queue.enqueue_many(None, jobs)


async def prune_frequency_counts(ctx: JobContext, at: datetime) -> None:
    """Hourly: the frequency cap forgets periods that ended more than a day ago."""
    await frequency.prune(ctx.db, at)


SWEEPS = [
    Sweep("funnels.tick", EVERY_10_SECONDS, tick),
    Sweep("funnels.frequency_prune", HOURLY_AT_20, prune_frequency_counts),
]
