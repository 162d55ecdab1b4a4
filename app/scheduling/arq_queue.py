"""The arq-on-Redis backend (server mode), behind the same interface as the database queue.

arq is in maintenance mode, so everything arq-specific stays in this module. Job names are our own
stable names; payloads travel as msgspec JSON bytes inside a msgpack envelope (no pickle); retries
with backoff are driven by raising ``arq.Retry`` until ``max_tries``, and a job that runs out of tries
is written to the database's dead-job list with its last error, next to the database queue's.

Priorities. An arq queue is one Redis sorted set scored by the time a job may start, and a worker
starts due jobs lowest score first, so a priority is expressed as that score
(:func:`timing`): an urgent job (priority below 0) is scored in a band far in the past, one
band per level, and starts before every ordinary due job of its queue, the bands in priority
order; priority 0 keeps the plain time order (retries and deferred jobs included, as before); a
less urgent job (priority above 0) waits ``priority`` seconds (at most a minute), so the jobs due
beside it go first. A job deferred with ``run_at`` into the future keeps its time: once due it is
in time order, since arq cannot re-score a waiting job.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec
from arq import Retry, Worker
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.worker import func

from app.logs import correlate
from app.scheduling.jobs import (
    JobContext,
    JobRegistry,
    JobSpec,
    log_job_done,
    log_job_failed,
    run_handler,
)
from app.scheduling.metrics import JOBS_FINISHED
from app.scheduling.queue import (
    DeadJob,
    QueuedJob,
    QueueStats,
    list_dead_jobs,
    record_dead_job,
)

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database, UnitOfWork

log = logging.getLogger(__name__)


def _serialize(obj: Any) -> bytes:
    return msgspec.msgpack.encode(obj)


def _deserialize(raw: bytes) -> Any:
    return msgspec.msgpack.decode(raw)


PRIORITY_BAND = timedelta(days=365 * 30)
"""How far into the past each level of urgency scores a due job: wider than any span of enqueue
times, so the bands never overlap."""
MAX_URGENCY = 100
"""Levels below 0 told apart (100 bands of 30 years stay exact in a Redis score, a double)."""
LESS_URGENT_STEP = timedelta(seconds=1)
"""The wait of a less urgent job per level above 0 ..."""
MAX_LESS_URGENT_WAIT = timedelta(minutes=1)
"""... and at most this long."""
JOB_EXPIRY = timedelta(days=1)
"""How long an urgent job is kept in Redis: arq's own default, given explicitly because arq derives
it from the score, which the band moves into the past."""


@dataclass(frozen=True, slots=True)
class Timing:
    """When arq may start a job: ``enqueue_job``'s ``_defer_until`` / ``_defer_by`` / ``_expires``."""

    defer_until: datetime | None = None
    defer_by: timedelta | None = None
    expires: timedelta | None = None


def timing(now: datetime, run_at: datetime | None, priority: int) -> Timing:
    """The start time arq orders a job by (see "Priorities" above). A due job's band is relative to
    arq's own enqueue time (``_defer_by``), as an ordinary job's start time is."""
    deferred = run_at is not None and run_at > now
    if priority > 0:
        wait = min(MAX_LESS_URGENT_WAIT, LESS_URGENT_STEP * priority)
        if deferred:
            assert run_at is not None
            return Timing(defer_until=run_at + wait)
        return Timing(defer_by=wait)
    if priority < 0 and not deferred:
        return Timing(defer_by=-PRIORITY_BAND * min(MAX_URGENCY, -priority), expires=JOB_EXPIRY)
    return Timing(defer_until=run_at)


class ArqQueue:
    backend = "arq"
    transactional = False

    def __init__(self, db: Database, clock: Clock, redis_url: str, queue_name: str) -> None:
        self.db = db
        self.clock = clock
        self.redis_settings = RedisSettings.from_dsn(redis_url)
        self.base_name = queue_name
        self._pool: ArqRedis | None = None
        self._lock = asyncio.Lock()

    def queue_key(self, queue: str) -> str:
        return f"{self.base_name}:{queue}"

    def job_key(self, job_id: str) -> str:
        # arq keeps every job and its result under ``arq:job:<id>`` / ``arq:result:<id>`` whatever
        # the queue, and refuses an id it still holds: two deployments sharing one Redis (or one
        # whose database ids restart) would silently drop each other's jobs with equal ids.
        return f"{self.base_name}:{job_id}"

    async def pool(self) -> ArqRedis:
        async with self._lock:
            if self._pool is None:
                self._pool = await create_pool(
                    self.redis_settings,
                    job_serializer=_serialize,
                    job_deserializer=_deserialize,
                    default_queue_name=self.queue_key("default"),
                )
            return self._pool

    async def enqueue(
        self,
        uow: UnitOfWork | None,
        spec: JobSpec[Any],
        payload: Any,
        *,
        job_id: str | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> None:
        await self.enqueue_many(uow, [(spec, payload, job_id)], run_at=run_at, priority=priority)

    async def enqueue_many(
        self,
        uow: UnitOfWork | None,
        jobs: Sequence[QueuedJob],
        *,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> None:
        """Publish the jobs now (``uow`` None: a failure is raised), or after ``uow`` commits."""
        encoded = [(spec, spec.encode(payload), job_id) for spec, payload, job_id in jobs]

        async def publish() -> None:
            pool = await self.pool()
            when = timing(self.clock.now(), run_at, priority)
            for spec, raw, job_id in encoded:
                await pool.enqueue_job(
                    spec.name,
                    raw,
                    _job_id=self.job_key(job_id) if job_id else None,
                    _queue_name=self.queue_key(spec.queue),
                    _defer_until=when.defer_until,
                    _defer_by=when.defer_by,
                    _expires=when.expires,
                )

        if uow is None:
            await publish()
        else:
            uow.after_commit(publish)

    async def housekeep(self, finished_before: datetime) -> None:
        """Nothing to do: arq requeues a dead worker's jobs and expires results itself."""

    async def stats(self) -> QueueStats:
        pool = await self.pool()
        queued = 0
        for key in await pool.keys(f"{self.base_name}:*"):
            if (await pool.type(key)) == b"zset":
                queued += int(await pool.zcard(key))
        running = len(await pool.keys("arq:in-progress:*"))
        dead = len(await list_dead_jobs(self.db, 10_000))
        return QueueStats(queued=queued, running=running, dead=dead, done=0)

    async def dead_jobs(self, limit: int = 50) -> list[DeadJob]:
        return await list_dead_jobs(self.db, limit)

    async def ping(self) -> bool:
        try:
            pool = await self.pool()
            return bool(await pool.ping())
        except Exception:
            log.warning("redis ping failed", exc_info=True)
            return False

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None


SHUTDOWN_RETRY_ALLOWANCE = 5
"""Extra arq tries beyond a job's own ``max_tries``: an attempt cancelled by a worker shutdown counts
as a try in arq, and must not make arq drop the job before it could fail for real."""

TIMEOUT_MARGIN_SECONDS = 5.0
"""arq's own job timeout sits this far beyond ours, so our timeout (a retryable failure) fires first."""


def _arq_function(
    spec: JobSpec[Any], queue: ArqQueue, make_context: Callable[[str, int], JobContext]
) -> Any:
    async def run(arq_ctx: dict[str, Any], raw: bytes) -> None:
        attempt = int(arq_ctx.get("job_try", 1))
        job_id = str(arq_ctx.get("job_id", "")).removeprefix(queue.base_name + ":")
        started = queue.clock.monotonic()
        try:
            with correlate(job_id):
                async with asyncio.timeout(spec.timeout_seconds):
                    await run_handler(spec, make_context(job_id, attempt), raw)
        except Exception as exc:
            if isinstance(exc, TimeoutError):
                error = f"timed out after {spec.timeout_seconds:g} s"
            else:
                error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            dead = spec.is_last_attempt(attempt)
            log_job_failed(job_id, spec.name, attempt, error, dead=dead)
            if not dead:
                JOBS_FINISHED.labels(spec.name, "retry").inc()
                raise Retry(defer=spec.retry_delay(attempt)) from exc
            JOBS_FINISHED.labels(spec.name, "dead").inc()
            await record_dead_job(
                queue.db,
                queue.clock,
                job_id=job_id,
                name=spec.name,
                payload=raw,
                attempts=attempt,
                error=error,
            )
            return
        JOBS_FINISHED.labels(spec.name, "done").inc()
        log_job_done(job_id, spec.name, attempt, queue.clock.monotonic() - started)

    return func(
        run,  # type: ignore[arg-type]
        name=spec.name,
        max_tries=spec.max_tries + SHUTDOWN_RETRY_ALLOWANCE,
        timeout=spec.timeout_seconds + TIMEOUT_MARGIN_SECONDS,
    )


class ArqWorkers:
    """One arq worker per queue name, inside the running event loop."""

    def __init__(
        self,
        queue: ArqQueue,
        registry: JobRegistry,
        make_context: Callable[[str, int], JobContext],
        *,
        concurrency: int,
        shutdown_grace: float,
        poll_delay: float = 0.1,
        queues: list[str] | None = None,
    ) -> None:
        self.queue = queue
        self.shutdown_grace = shutdown_grace
        self.workers: list[Worker] = []
        functions = [_arq_function(s, queue, make_context) for s in registry.specs.values()]
        for name in queues or registry.queues:
            self.workers.append(
                Worker(
                    functions=functions,
                    queue_name=queue.queue_key(name),
                    redis_settings=queue.redis_settings,
                    job_serializer=_serialize,
                    job_deserializer=_deserialize,
                    max_jobs=concurrency,
                    handle_signals=False,
                    poll_delay=poll_delay,
                    keep_result=3600,
                    allow_abort_jobs=False,
                    # Cron and schedules are ours (the sweepers); arq only runs jobs, in UTC.
                    timezone=UTC,
                )
            )
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        self._tasks = [asyncio.create_task(w.async_run()) for w in self.workers]
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def shutdown(self) -> None:
        """Stop picking jobs, give in-flight jobs the grace period, then cancel the rest.

        A cancelled arq job stays in its queue (arq retries cancelled jobs), so another worker runs
        it again: the same finish-or-release promise as the database queue.
        """
        for worker in self.workers:
            worker.allow_pick_jobs = False
        running = [t for w in self.workers for t in w.tasks.values() if not t.done()]
        if running:
            log.info("waiting up to %.0f s for %d jobs", self.shutdown_grace, len(running))
            await asyncio.wait(running, timeout=self.shutdown_grace)
        for worker in self.workers:
            await worker.close()  # cancels what is left and closes its Redis pool
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
