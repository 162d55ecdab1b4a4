"""The arq backend's workers: each job run under our own timeout, its retries and its death
recorded in the database, and the worker processes kept running through a Redis outage.

The workers (:class:`ArqWorkers`) wait for Redis and start polling again when it answers; the
process logs one line when Redis stops answering and one when it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections.abc import Callable
from datetime import UTC
from typing import TYPE_CHECKING, Any

from arq import Retry, Worker
from arq.connections import ArqRedis
from arq.worker import func
from sqlalchemy import update

from app.logs import correlate
from app.scheduling import attempts as history
from app.scheduling.arq_lease import LeasedWorker, LeaseKeeper
from app.scheduling.arq_redis import REDIS_DOWN, deserialize, serialize
from app.scheduling.arq_watchdog import RedisWatchdog, cut
from app.scheduling.dead_rows import record_dead_job
from app.scheduling.jobs import (
    JobContext,
    JobRegistry,
    JobSpec,
    log_job_done,
    log_job_failed,
    run_handler,
)
from app.scheduling.metrics import JOBS_FINISHED
from app.scheduling.models import JOB_DONE, JOB_QUEUED, JOBS, Job
from app.scheduling.outside_calls import current_permit

if TYPE_CHECKING:
    from app.scheduling.arq_queue import ArqQueue

log = logging.getLogger(__name__)


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
            done = JOBS.transition(
                update(Job.__table__).where(Job.id == job_id),  # type: ignore[arg-type]
                JOB_DONE,
                from_=(JOB_QUEUED,),
            )
            await uow.session.execute(
                done.values(
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
                    job_serializer=serialize,
                    job_deserializer=deserialize,
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
        self.waiting_for_redis = 0
        """Workers whose loop ended at a Redis outage and that wait for Redis to answer."""

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
        self.waiting_for_redis += 1
        try:
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
        finally:
            self.waiting_for_redis -= 1

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
