"""How the engine runs inside ``serve`` and ``worker``: a 10-second sweep enqueues, keyed by
its tick, the matcher, the goal watcher, ``FUNNEL_RUNNER_TASKS`` runner jobs and
``FUNNEL_DELIVER_TASKS`` deliverer jobs. Each runner or deliverer job drains due work in batches
for up to ``FUNNEL_DRAIN_SECONDS``; any worker process (``python -m app worker``) runs them, so
concurrency scales with worker processes and tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.engines.funnels.contacts import erased_addresses
from app.engines.funnels.events.segment_triggers import evaluate_segments
from app.engines.funnels.events.triggers import match_events
from app.engines.funnels.outbox import frequency
from app.engines.funnels.outbox.deliver import (
    ChannelFactory,
    ChannelSender,
    Deliverer,
    EmailChannel,
)
from app.engines.funnels.outbox.mail_tracking import WorkspaceTracking
from app.engines.funnels.runs.goals import watch_goals
from app.engines.funnels.runs.nodes import Executors
from app.engines.funnels.runs.runner import Runner
from app.integrations.mail import SmtpPool
from app.scheduling.jobs import JobContext, JobPayload, JobSpec
from app.scheduling.sweeper import EVERY_10_SECONDS, HOURLY_AT_20, Sweep, tick_key
from app.scheduling.worker import worker_identity

MAX_BATCHES_PER_JOB = 1000


class Shard(JobPayload, frozen=True):
    shard: int = 0


def mail_domain(ctx: JobContext) -> str:
    address = ctx.settings.mail.from_address
    return address.rpartition("@")[2] or "localhost"


def email_channel(ctx: JobContext) -> ChannelSender:
    """The ``email`` channel's sender: one per process, over one SMTP pool shared by its
    deliverer jobs (closed with the resources)."""

    def build() -> EmailChannel:
        signing = WorkspaceTracking(ctx.db, ctx.secrets, ctx.settings.web.public_url)
        return EmailChannel(
            SmtpPool(ctx.settings.mail, ctx.settings.funnels.deliver_in_flight),
            tracking=signing,
            signing=signing,
            mailto_address=ctx.settings.mail.unsubscribe_mailbox,
        )

    return ctx.resources.get("funnels.channel.email", build)


@dataclass(frozen=True, slots=True)
class Registries:
    """What the runner and the deliverer dispatch on, built explicitly by the plugin
    (:mod:`app.engines.funnels.plugin`): node kind → executor, channel → sender factory."""

    executors: Executors
    channels: Mapping[str, ChannelFactory]


class RunnerJobs:
    """The runner's and the deliverer's jobs over the plugin's registries. The runner and the
    deliverer are built once per process (kept in its resources) and handed the registries."""

    def __init__(self, registries: Registries) -> None:
        self.registries = registries
        self.specs: list[JobSpec[Any]] = [
            dataclasses.replace(ADVANCE, handler=self.advance),
            dataclasses.replace(DELIVER, handler=self.deliver),
        ]
        """:data:`ADVANCE` and :data:`DELIVER` with their handlers, as the process registers them."""

    def runner_for(self, ctx: JobContext) -> Runner:
        return ctx.resources.get(
            "funnels.runner",
            lambda: Runner(
                ctx.db,
                ctx.settings.funnels,
                mail_domain=mail_domain(ctx),
                executors=self.registries.executors,
            ),
        )

    def deliverer_for(self, ctx: JobContext) -> Deliverer:
        channels = self.registries.channels

        def senders(channel: str) -> ChannelSender | None:
            factory = channels.get(channel)
            return None if factory is None else factory(ctx)

        return ctx.resources.get(
            "funnels.deliverer",
            lambda: Deliverer(
                ctx.db,
                ctx.settings.funnels,
                senders,
                lease_seconds=ctx.settings.funnels.lease_seconds,
                clock=ctx.clock,
                address_key=ctx.secrets.derive(erased_addresses.PURPOSE),
            ),
        )

    async def advance(self, ctx: JobContext, payload: Shard) -> None:
        """Execute due runs until none are due or the drain time is used up."""
        runner = self.runner_for(ctx)
        started = ctx.clock.monotonic()
        effects = 0
        for _ in range(MAX_BATCHES_PER_JOB):
            result = await runner.run_batch(owner=_owner(ctx), now=ctx.clock.now())
            effects += result.effects
            if (
                result.leased == 0
                or ctx.clock.monotonic() - started > ctx.settings.funnels.drain_seconds
            ):
                break
        if effects:
            # Deliver promptly rather than at the next tick.
            await ctx.queue.enqueue(None, DELIVER, Shard(shard=payload.shard))

    async def deliver(self, ctx: JobContext, payload: Shard) -> None:
        deliverer = self.deliverer_for(ctx)
        started = ctx.clock.monotonic()
        for _ in range(MAX_BATCHES_PER_JOB):
            result = await deliverer.run_batch(owner=_owner(ctx), now=ctx.clock.now)
            if (
                result.leased == 0
                or ctx.clock.monotonic() - started > ctx.settings.funnels.drain_seconds
            ):
                break


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
        await ctx.queue.enqueue(None, ADVANCE, Shard(shard=0))


async def goals(ctx: JobContext, payload: Shard) -> None:
    if await watch_goals(ctx.db, now=ctx.clock.now()):
        await ctx.queue.enqueue(None, ADVANCE, Shard(shard=0))


async def _handled_by_runner_jobs(ctx: JobContext, payload: Shard) -> None:
    raise RuntimeError("funnels.advance and funnels.deliver run as RunnerJobs.specs")


ADVANCE = JobSpec(
    "funnels.advance", Shard, _handled_by_runner_jobs, max_tries=3, timeout_seconds=120
)
"""The runner's job, as it is enqueued; :class:`RunnerJobs` registers it with its handler."""
DELIVER = JobSpec(
    "funnels.deliver", Shard, _handled_by_runner_jobs, max_tries=3, timeout_seconds=300
)
"""The deliverer's job, as it is enqueued; :class:`RunnerJobs` registers it with its handler."""
MATCH = JobSpec("funnels.match", Shard, match, max_tries=5, timeout_seconds=120)
GOALS = JobSpec("funnels.goals", Shard, goals, max_tries=3, timeout_seconds=120)
JOBS = [MATCH, GOALS]
"""The jobs with no registry to be handed (the runner's and the deliverer's: :class:`RunnerJobs`)."""


async def tick(ctx: JobContext, at: datetime) -> None:
    """Every 10 seconds: one matcher, one goal watcher, N runners, M deliverers (keyed by the
    tick, so two processes sweeping the same tick enqueue them once)."""
    fs = ctx.settings.funnels
    await ctx.queue.enqueue(None, MATCH, Shard(), job_id=tick_key("funnels.match", 0, at))
    await ctx.queue.enqueue(None, GOALS, Shard(), job_id=tick_key("funnels.goals", 0, at))
    for i in range(max(1, fs.runner_tasks)):
        await ctx.queue.enqueue(
            None, ADVANCE, Shard(shard=i), job_id=tick_key("funnels.advance", i, at)
        )
    for i in range(max(1, fs.deliver_tasks)):
        await ctx.queue.enqueue(
            None, DELIVER, Shard(shard=i), job_id=tick_key("funnels.deliver", i, at)
        )


async def prune_frequency_counts(ctx: JobContext, at: datetime) -> None:
    """Hourly: the frequency cap forgets periods that ended more than a day ago."""
    await frequency.prune(ctx.db, at)


SWEEPS = [
    Sweep("funnels.tick", EVERY_10_SECONDS, tick),
    Sweep("funnels.frequency_prune", HOURLY_AT_20, prune_frequency_counts),
]
