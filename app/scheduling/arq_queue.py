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

Redis down. Every connection and command gets one try within ``REDIS_TIMEOUT_SECONDS``
(:func:`redis_client`; arq's own ``create_pool`` would retry the first connection five times a
second apart, and without a read timeout wait forever on a Redis that accepts and never answers),
and fails as :class:`~app.scheduling.unavailable.QueueUnavailable`, a 503 in a request; while
the outage lasts one call a second tries Redis and the others fail at once. The client
reconnects on the next call that tries, so nothing needs a restart once Redis is back. A job queued
inside a unit of work is published after its commit; Redis is asked first, inside the unit of
work, so that an outage rolls the unit of work back instead of committing state whose job is
never published (Redis stopping in the moment between the check and the publish is only logged).
A job's in-progress mark is a short lease renewed while it runs (:mod:`app.scheduling.arq_lease`),
so a job whose worker died runs again within ``JOB_LEASE_SECONDS``, not after the longest timeout.

The workers (:class:`ArqWorkers`) wait for Redis and start polling again when it answers; the
process logs one line when Redis stops answering and one when it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import redis.exceptions
from arq import Retry, Worker
from arq.connections import ArqRedis, RedisSettings
from arq.constants import result_key_prefix
from arq.worker import func
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import NoBackoff

from app.logs import correlate
from app.scheduling import attempts as history
from app.scheduling.arq_lease import LeasedWorker, LeaseKeeper
from app.scheduling.arq_watchdog import RedisWatchdog, cut
from app.scheduling.jobs import (
    JobContext,
    JobRegistry,
    JobSpec,
    log_job_done,
    log_job_failed,
    run_handler,
)
from app.scheduling.metrics import JOBS_FINISHED
from app.scheduling.models import JOB_DONE, JOB_QUEUED, Job
from app.scheduling.outside_calls import current_permit
from app.scheduling.queue import (
    DeadJob,
    QueuedJob,
    QueueStats,
    list_dead_jobs,
    record_dead_job,
    revive_row,
)
from app.scheduling.unavailable import Outage, QueueUnavailable

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


DEFAULT_TIMEOUT_SECONDS = 2.0
"""``REDIS_TIMEOUT_SECONDS``' default (app/settings.py)."""

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)
"""What Redis not answering raises (refused, reset, timed out, still loading its data set); an
error Redis answers with (a wrong type, an unknown command) is not an outage."""

UNAVAILABLE_MESSAGE = "The job queue (Redis) is not reachable; try again in a moment."
NOTHING_CHANGED_MESSAGE = (
    "The job queue (Redis) is not reachable, so nothing was changed; try again in a moment."
)

T = TypeVar("T")


def redis_client(
    settings: RedisSettings, timeout: float, *, per_command: bool = True, **arq_options: Any
) -> ArqRedis:
    """A client that connects on first use (not here) and reconnects on the call after a
    failure; each connection and each command is tried once, for at most ``timeout`` seconds
    (``per_command`` False: the connection only; the caller bounds the commands, as the
    workers' :class:`~app.scheduling.arq_watchdog.RedisWatchdog` does). The connection options
    are :func:`arq.connections.create_pool`'s."""
    return ArqRedis(
        host=settings.host,
        port=settings.port,
        unix_socket_path=settings.unix_socket_path,
        db=settings.database,
        username=settings.username,
        password=settings.password,
        ssl=settings.ssl,
        ssl_keyfile=settings.ssl_keyfile,
        ssl_certfile=settings.ssl_certfile,
        ssl_cert_reqs=settings.ssl_cert_reqs,
        ssl_ca_certs=settings.ssl_ca_certs,
        ssl_ca_data=settings.ssl_ca_data,
        ssl_check_hostname=settings.ssl_check_hostname,
        max_connections=settings.max_connections,
        encoding="utf8",
        socket_connect_timeout=timeout,
        # Also bounds the handshake after connecting (CLIENT SETINFO), where a Redis that
        # accepts connections but never answers would otherwise hold the caller for good.
        socket_timeout=timeout if per_command else None,
        # Explicit: newer redis-py versions retry with backoff by default.
        retry=RedisRetry(NoBackoff(), 0),
        **arq_options,
    )


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

    def __init__(
        self,
        db: Database,
        clock: Clock,
        redis_url: str,
        queue_name: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.db = db
        self.clock = clock
        self.redis_settings = RedisSettings.from_dsn(redis_url)
        self.timeout = timeout
        self.base_name = queue_name
        self.outage = Outage("Redis (the job queue)", clock.monotonic)
        self._pool: ArqRedis | None = None

    def queue_key(self, queue: str) -> str:
        return f"{self.base_name}:{queue}"

    def job_key(self, job_id: str) -> str:
        # arq keeps every job and its result under ``arq:job:<id>`` / ``arq:result:<id>`` whatever
        # the queue, and refuses an id it still holds: two deployments sharing one Redis (or one
        # whose database ids restart) would silently drop each other's jobs with equal ids.
        return f"{self.base_name}:{job_id}"

    def client(self, queue_name: str = "default", *, per_command: bool = True) -> ArqRedis:
        """A new client with this queue's options (each arq worker closes its own)."""
        return redis_client(
            self.redis_settings,
            self.timeout,
            per_command=per_command,
            job_serializer=_serialize,
            job_deserializer=_deserialize,
            default_queue_name=self.queue_key(queue_name),
        )

    async def pool(self) -> ArqRedis:
        if self._pool is None:
            self._pool = self.client()
        return self._pool

    async def _call(self, call: Callable[[ArqRedis], Awaitable[T]], message: str) -> T:
        """``call`` on the client; Redis not answering is :class:`QueueUnavailable`, at once
        while an outage is known and another call tried Redis within the last second."""
        if not self.outage.may_try():
            raise QueueUnavailable(message)
        try:
            result = await call(await self.pool())
        except REDIS_DOWN as exc:
            self.outage.failed(exc)
            raise QueueUnavailable(message) from exc
        self.outage.answered()
        return result

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

        async def publish_all(pool: ArqRedis) -> None:
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

        async def publish() -> None:
            await self._call(publish_all, UNAVAILABLE_MESSAGE)

        if uow is None:
            await publish()
            return
        # Inside the unit of work: an outage rolls it back (see the module's docstring).
        await self._call(_ping, NOTHING_CHANGED_MESSAGE)
        uow.after_commit(publish)

    async def housekeep(self, finished_before: datetime) -> None:
        """Nothing to do: arq requeues a dead worker's jobs and expires results itself."""

    async def stats(self) -> QueueStats:
        async def counts(pool: ArqRedis) -> tuple[int, int]:
            queued = 0
            for key in await pool.keys(f"{self.base_name}:*"):
                if (await pool.type(key)) == b"zset":
                    queued += int(await pool.zcard(key))
            return queued, len(await pool.keys("arq:in-progress:*"))

        queued, running = await self._call(counts, UNAVAILABLE_MESSAGE)
        dead = len(await list_dead_jobs(self.db, 10_000))
        return QueueStats(queued=queued, running=running, dead=dead, done=0)

    async def dead_jobs(self, limit: int = 50) -> list[DeadJob]:
        return await list_dead_jobs(self.db, limit)

    async def revive(
        self, uow: UnitOfWork, job: Job, *, queue: str, max_tries: int, run_at: datetime
    ) -> bool:
        """The dead job's row turns ``queued`` (arq has the job; the row keeps its history and
        is marked done when the revived job succeeds) and the job is published after the commit,
        under its own id: arq's kept result of the dead run is deleted first, or arq would take
        the id for a duplicate and drop the job."""
        if not await revive_row(uow.session, job, queue=queue, max_tries=max_tries, at=run_at):
            return False
        key = self.job_key(job.id)
        payload, name = bytes(job.payload), job.name
        when = timing(self.clock.now(), run_at, 0)

        async def publish(pool: ArqRedis) -> None:
            await pool.delete(result_key_prefix + key)
            await pool.enqueue_job(
                name,
                payload,
                _job_id=key,
                _queue_name=self.queue_key(queue),
                _defer_until=when.defer_until,
                revived=True,
            )

        await self._call(_ping, NOTHING_CHANGED_MESSAGE)
        uow.after_commit(lambda: self._call(publish, UNAVAILABLE_MESSAGE))
        return True

    async def ping(self) -> bool:
        """Whether Redis answers; an outage is logged once (:attr:`outage`), not per probe."""
        try:
            return bool(await self._call(_ping, UNAVAILABLE_MESSAGE))
        except QueueUnavailable:
            return False

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None


async def _ping(pool: ArqRedis) -> bool:
    return bool(await pool.ping())


SHUTDOWN_RETRY_ALLOWANCE = 5
"""Extra arq tries beyond a job's own ``max_tries``: an attempt cancelled by a worker shutdown counts
as a try in arq, and must not make arq drop the job before it could fail for real."""

TIMEOUT_MARGIN_SECONDS = 5.0
"""arq's own job timeout sits this far beyond ours, so our timeout (a retryable failure) fires first."""


def _arq_function(
    spec: JobSpec[Any], queue: ArqQueue, make_context: Callable[[str, int], JobContext]
) -> Any:
    async def run(arq_ctx: dict[str, Any], raw: bytes, revived: bool = False) -> None:
        attempt = int(arq_ctx.get("job_try", 1))
        job_id = str(arq_ctx.get("job_id", "")).removeprefix(queue.base_name + ":")
        started = queue.clock.monotonic()
        try:
            with correlate(job_id):
                async with asyncio.timeout(spec.timeout_seconds):
                    await run_handler(spec, make_context(job_id, attempt), raw)
        except Exception as exc:
            permit = current_permit()
            if permit is not None and permit.revoked:
                return  # its lease was lost: the attempt that took the job over records it
            if isinstance(exc, TimeoutError):
                error = f"timed out after {spec.timeout_seconds:g} s"
            else:
                error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            dead = spec.is_last_attempt(attempt)
            log_job_failed(job_id, spec.name, attempt, error, dead=dead)
            if not dead:
                JOBS_FINISHED.labels(spec.name, "retry").inc()
                await _record_retry(queue, job_id, spec.name, attempt, error)
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
        if revived:
            await _record_revived_done(queue, job_id, attempt)
        log_job_done(job_id, spec.name, attempt, queue.clock.monotonic() - started)

    return func(
        run,  # type: ignore[arg-type]
        name=spec.name,
        max_tries=spec.max_tries + SHUTDOWN_RETRY_ALLOWANCE,
        timeout=spec.timeout_seconds + TIMEOUT_MARGIN_SECONDS,
    )


async def _record_retry(queue: ArqQueue, job_id: str, name: str, attempt: int, error: str) -> None:
    """The failed attempt in the job's history; a failure to write it must not lose the retry."""
    try:
        async with queue.db.write() as uow:
            await history.record_arq_attempt(
                uow.session,
                queue.clock.now(),
                job_id=job_id,
                name=name,
                attempt=attempt,
                error=error,
                dead=False,
            )
    except Exception:
        log.exception("could not record the failed attempt %d of job %s", attempt, job_id)


async def _record_revived_done(queue: ArqQueue, job_id: str, attempt: int) -> None:
    """A revived job succeeded: its row (kept since it died) says so, as a database-queue job's
    row does, which is the successful attempt in its history. Not raised: the job did its work,
    and arq would run it again."""
    try:
        async with queue.db.write() as uow:
            await uow.session.execute(
                Job.__table__.update()  # type: ignore[attr-defined]
                .where(Job.id == job_id, Job.status == JOB_QUEUED)
                .values(
                    status=JOB_DONE,
                    attempts=attempt,
                    finished_at=queue.clock.now(),
                    leased_by=history.process_identity(),
                )
            )
    except Exception:
        log.exception("could not record that the revived job %s succeeded", job_id)


DEFAULT_LEASE_SECONDS = 30.0
"""``JOB_LEASE_SECONDS``' default (app/settings.py): a job's in-progress lease on arq."""

RECONNECT_FIRST_DELAY = 0.5
"""A worker that lost Redis asks it again after this long, then twice as long each time ..."""
RECONNECT_MAX_DELAY = 5.0
"""... up to this: one connection attempt per worker every few seconds during an outage."""


def _forget_finished_jobs(worker: Worker) -> None:
    """Drop the jobs that ended while the worker loop was down: the loop would re-raise the
    failure of one that could not record its end in Redis as soon as it runs again."""
    for job_id, task in list(worker.tasks.items()):
        if task.done():
            del worker.tasks[job_id]
            if not task.cancelled() and task.exception() is not None:
                log.debug("arq job %s ended without its result recorded", job_id)


async def _close(worker: Worker, timeout: float) -> None:
    """``worker.close()`` (cancels the jobs still running, closes the worker's client), also
    when Redis is down or frozen: arq's own close ends at its first failed Redis call, and the
    worker's client has no timeout per command (its watchdog has stopped by now)."""
    client = worker.pool
    try:
        # Two timeouts: the cancelled jobs record their ends and the worker its own, a few
        # commands each, before the client closes.
        async with asyncio.timeout(2 * timeout):
            await worker.close()
    except REDIS_DOWN as exc:  # TimeoutError is an OSError
        log.info("the arq worker of %s closed without Redis: %s", worker.queue_name, exc)
        await cut(client)
        with contextlib.suppress(*REDIS_DOWN):
            await client.aclose()


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
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.queue = queue
        self.shutdown_grace = shutdown_grace
        self.workers: list[LeasedWorker] = []
        functions = [_arq_function(s, queue, make_context) for s in registry.specs.values()]
        for name in queues or registry.queues:
            self.workers.append(
                LeasedWorker(
                    lease_seconds=lease_seconds,
                    functions=functions,
                    queue_name=queue.queue_key(name),
                    # No timeout per command (a third of the drain rate): the watchdog below
                    # bounds the whole client instead (app/scheduling/arq_watchdog.py).
                    redis_pool=queue.client(name, per_command=False),
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
        # Renews the jobs' short in-progress leases (app/scheduling/arq_lease.py) until the
        # workers are closed, through the shutdown's grace period too.
        self.keeper = LeaseKeeper(self.workers, lease_seconds, queue.clock.monotonic)
        self.watchdog = RedisWatchdog(
            lambda: [w._pool for w in self.workers],  # None once a worker is closed
            timeout=queue.timeout,
            interval=queue.timeout / 2,
            down=REDIS_DOWN,
            on_frozen=queue.outage.failed,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    async def run(self) -> None:
        self._tasks = [asyncio.create_task(self._supervise(w)) for w in self.workers]
        helpers = [
            asyncio.create_task(self.keeper.run(), name="arq-leases"),
            asyncio.create_task(self.watchdog.run(), name="arq-watchdog"),
        ]
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _supervise(self, worker: Worker) -> None:
        """Run ``worker``; while Redis does not answer, wait for it and then run it again.

        arq's worker loop ends at the first failed Redis call, so without this one outage would
        stop the process's workers for good. The jobs it had started run on meanwhile; those
        that could not record their end in Redis are run again by arq (at-least-once)."""
        while not self._stopping:
            try:
                await worker.async_run()
                return
            except REDIS_DOWN as exc:
                self.queue.outage.failed(exc)
            except Exception:
                log.exception("the arq worker of %s stopped", worker.queue_name)
                return
            _forget_finished_jobs(worker)
            await self._until_redis_answers(worker.pool)

    async def _until_redis_answers(self, pool: ArqRedis) -> None:
        delay = RECONNECT_FIRST_DELAY
        while not self._stopping:
            await asyncio.sleep(delay)
            try:
                async with asyncio.timeout(self.queue.timeout):  # the client has no timeout
                    await pool.ping()
            except REDIS_DOWN:
                delay = min(RECONNECT_MAX_DELAY, delay * 2)
                continue
            self.queue.outage.answered()
            return

    async def shutdown(self) -> None:
        """Stop picking jobs, give in-flight jobs the grace period, then cancel the rest.

        A cancelled arq job stays in its queue (arq retries cancelled jobs), so another worker runs
        it again: the same finish-or-release promise as the database queue.
        """
        self._stopping = True
        for worker in self.workers:
            worker.allow_pick_jobs = False
        running = [t for w in self.workers for t in w.tasks.values() if not t.done()]
        if running:
            log.info("waiting up to %.0f s for %d jobs", self.shutdown_grace, len(running))
            await asyncio.wait(running, timeout=self.shutdown_grace)
        for worker in self.workers:
            await _close(worker, self.queue.timeout)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
