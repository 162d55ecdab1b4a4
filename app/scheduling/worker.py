"""The database-queue worker: lease in batches, run concurrently, complete in batches.

Leasing many rows per statement and writing completions in one statement per loop is what makes the
queue fast; each job still runs in its own units of work, so one job's failure never touches another.
On stop: no more leasing, in-flight jobs get a grace period, then the rest are cancelled and released.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from app.scheduling.jobs import JobContext, JobRegistry, run_handler
from app.scheduling.metrics import JOB_DURATION, JOBS_FINISHED, JOBS_LEASED
from app.scheduling.queue import DatabaseQueue, LeasedJob

log = logging.getLogger(__name__)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class DatabaseWorker:
    """Runs jobs from a :class:`DatabaseQueue` until :meth:`stop` is called."""

    def __init__(
        self,
        queue: DatabaseQueue,
        registry: JobRegistry,
        make_context: Callable[[str, int], JobContext],
        *,
        concurrency: int,
        batch_size: int,
        lease_seconds: float,
        poll_interval: float,
        shutdown_grace: float,
        queues: list[str] | None = None,
    ) -> None:
        self.queue = queue
        self.registry = registry
        self.make_context = make_context
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.shutdown_grace = shutdown_grace
        self.queues = queues or registry.queues
        self.worker_id = f"{worker_identity()}:{id(self):x}"
        self._stopping = asyncio.Event()
        self._inflight: dict[asyncio.Task[None], LeasedJob] = {}
        self._done: list[tuple[str, int]] = []
        self._slot_free = asyncio.Event()
        self.jobs_run = 0

    def stop(self) -> None:
        self._stopping.set()
        self._slot_free.set()

    async def run(self) -> None:
        log.info("worker %s started on queues %s", self.worker_id, ",".join(self.queues))
        last_recovery = -1e9
        clock = self.queue.clock
        try:
            while not self._stopping.is_set():
                if clock.monotonic() - last_recovery > 5:
                    last_recovery = clock.monotonic()
                    await self._recover()
                await self._flush_done()
                free = self.concurrency - len(self._inflight)
                leased: list[LeasedJob] = []
                if free > 0:
                    leased = await self.queue.lease(
                        self.worker_id, self.queues, min(free, self.batch_size), self.lease_seconds
                    )
                    for job in leased:
                        self._start(job)
                if leased and len(leased) == min(free, self.batch_size):
                    await asyncio.sleep(0)  # more may be waiting: lease again straight away
                    continue
                await self._idle(free <= 0)
        finally:
            await self._shutdown()

    async def _idle(self, full: bool) -> None:
        """Wait for a freed slot, a job queued in this process, a stop, or the poll interval."""
        self._slot_free.clear()
        waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._slot_free.wait())}
        if not full:
            waiters.add(asyncio.ensure_future(self.queue.wait_for_work(self.poll_interval)))
        _, pending = await asyncio.wait(
            waiters, timeout=self.poll_interval, return_when=asyncio.FIRST_COMPLETED
        )
        for fut in pending:
            fut.cancel()

    async def _recover(self) -> None:
        try:
            recovered = await self.queue.recover_expired()
            if recovered:
                log.warning("requeued %d jobs whose lease expired", recovered)
        except Exception:
            log.exception("lease recovery failed")

    def _start(self, job: LeasedJob) -> None:
        JOBS_LEASED.inc()
        task = asyncio.create_task(self._execute(job), name=f"job:{job.id}")
        self._inflight[task] = job
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        self._slot_free.set()

    async def _execute(self, job: LeasedJob) -> None:
        clock = self.queue.clock
        try:
            spec = self.registry.get(job.name)
        except KeyError:
            await self._failed(job, f"no job named {job.name!r} is registered", None)
            return
        ctx = self.make_context(job.id, job.attempts)
        started = clock.monotonic()
        try:
            await asyncio.wait_for(run_handler(spec, ctx, job.payload), spec.timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            if isinstance(exc, TimeoutError):
                detail = f"timed out after {spec.timeout_seconds:g} s"
            await self._failed(job, detail, spec.retry_delay(job.attempts))
            return
        finally:
            JOB_DURATION.labels(job.name).observe(max(0.0, clock.monotonic() - started))
        self.jobs_run += 1
        JOBS_FINISHED.labels(job.name, "done").inc()
        self._done.append((job.id, job.attempts))

    async def _failed(self, job: LeasedJob, error: str, delay: float | None) -> None:
        now = self.queue.clock.now()
        if delay is None:
            job = LeasedJob(job.id, job.name, job.payload, job.max_tries, job.max_tries)
        retry_at = now + timedelta(seconds=delay or 0)
        try:
            dead = await self.queue.fail(job, error, retry_at)
        except Exception:
            log.exception("could not record the failure of job %s", job.id)
            return
        JOBS_FINISHED.labels(job.name, "dead" if dead else "retry").inc()
        log.warning(
            "job failed",
            extra={"job_id": job.id, "job": job.name, "attempt": job.attempts, "dead": dead},
        )

    async def _flush_done(self) -> None:
        done, self._done = self._done, []
        if done:
            try:
                await self.queue.complete(done)
            except Exception:
                log.exception("could not record %d finished jobs", len(done))
                self._done.extend(done)

    async def _shutdown(self) -> None:
        if self._inflight:
            log.info("waiting up to %.0f s for %d jobs", self.shutdown_grace, len(self._inflight))
            _, pending = await asyncio.wait(set(self._inflight), timeout=self.shutdown_grace)
            unfinished = [self._inflight[t] for t in pending]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if unfinished:
                await self.queue.release(unfinished)
                log.info("released %d unfinished jobs", len(unfinished))
        await self._flush_done()

    @property
    def inflight(self) -> int:
        return len(self._inflight)
