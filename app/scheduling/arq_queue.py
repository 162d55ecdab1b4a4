"""The arq-on-Redis backend (server mode), behind the same interface as the database queue.

arq is in maintenance mode, so everything arq-specific stays in this module and
:mod:`app.scheduling.arq_redis` (the client, the envelope, the score). Job names are our own
stable names; payloads travel as msgspec JSON bytes inside a msgpack envelope (no pickle); retries
with backoff are driven by raising ``arq.Retry`` until ``max_tries``, and a job that runs out of tries
is written to the database's dead-job list with its last error, next to the database queue's.

Priorities travel as the score arq orders a queue by (:func:`~app.scheduling.arq_redis.timing`).

Redis down. Every connection and command gets one try within ``REDIS_TIMEOUT_SECONDS``
(:func:`~app.scheduling.arq_redis.redis_client`; arq's own ``create_pool`` would retry the first connection five times a
second apart, and without a read timeout wait forever on a Redis that accepts and never answers),
and fails as :class:`~app.scheduling.unavailable.QueueUnavailable`, a 503 in a request; while
the outage lasts one call a second tries Redis and the others fail at once. The client
reconnects on the next call that tries, so nothing needs a restart once Redis is back. A job queued
inside a unit of work is published after its commit; Redis is asked first, inside the unit of
work, so that an outage rolls the unit of work back instead of committing state whose job is
never published (Redis stopping in the moment between the check and the publish is only logged).
A job's in-progress mark is a short lease renewed while it runs (:mod:`app.scheduling.arq_lease`),
so a job whose worker died runs again within ``JOB_LEASE_SECONDS``, not after the longest timeout.

Its workers are :mod:`app.scheduling.arq_workers`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from arq.connections import ArqRedis, RedisSettings
from arq.constants import result_key_prefix

from app.scheduling.arq_redis import (
    DEFAULT_TIMEOUT_SECONDS,
    REDIS_DOWN,
    deserialize,
    publish_jobs,
    redis_client,
    serialize,
    timing,
)
from app.scheduling.dead_rows import DeadJob, list_dead_jobs, revive_row
from app.scheduling.jobs import (
    JobSpec,
)
from app.scheduling.models import Job
from app.scheduling.queue import QueuedJob, QueueStats
from app.scheduling.unavailable import Outage, QueueUnavailable

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database, UnitOfWork

log = logging.getLogger(__name__)


UNAVAILABLE_MESSAGE = "The job queue (Redis) is not reachable; try again in a moment."
NOTHING_CHANGED_MESSAGE = (
    "The job queue (Redis) is not reachable, so nothing was changed; try again in a moment."
)

T = TypeVar("T")


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
            job_serializer=serialize,
            job_deserializer=deserialize,
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
            await publish_jobs(
                pool,
                [
                    (
                        spec.name,
                        raw,
                        self.job_key(job_id) if job_id else None,
                        self.queue_key(spec.queue),
                    )
                    for spec, raw, job_id in encoded
                ],
                when,
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
