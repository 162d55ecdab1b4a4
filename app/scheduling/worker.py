"""The database-queue worker: lease in batches, run concurrently, complete in batches.

Leasing many rows per statement, and writing the finished jobs of one batch in the same statement
that leases the next, is what makes the queue fast; each job still runs in its own units of work, so
one job's failure never touches another. The loop wakes only when there is something to do: enough
free slots for a worthwhile batch, jobs committed in this process, a stop, or the poll interval.

While jobs run, the worker extends their leases (a heartbeat), so only a worker that really stopped
loses its jobs to another one. On stop: no more leasing, in-flight jobs get a grace period, then the
rest are cancelled and released without counting the attempt.
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

from app.logs import correlate
from app.scheduling.jobs import (
    JobContext,
    JobRegistry,
    JobSpec,
    log_job_done,
    log_job_failed,
    run_handler,
)
from app.scheduling.metrics import JOB_DURATION, JOBS_FINISHED, JOBS_LEASED, WORKER_LOOP_ERRORS
from app.scheduling.queue import DatabaseQueue, Finished, LeasedJob

log = logging.getLogger(__name__)

RECOVERY_INTERVAL_SECONDS = 5.0
"""How often each worker requeues jobs whose lease expired (at most; see ``_recovery_interval``)."""


STALL_SECONDS = 60.0
"""A worker loop that has not come round for this long (or three poll intervals) is stalled: one
turn waits at most a poll interval plus one lease statement (which may wait on a busy lock)."""


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class _JobMetrics:
    """The labelled metric children of one job name, looked up once instead of once per job."""

    __slots__ = ("dead", "done", "duration", "retry")

    def __init__(self, name: str) -> None:
        self.duration = JOB_DURATION.labels(name)
        self.done = JOBS_FINISHED.labels(name, "done")
        self.retry = JOBS_FINISHED.labels(name, "retry")
        self.dead = JOBS_FINISHED.labels(name, "dead")


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
        if concurrency < 1 or batch_size < 1 or lease_seconds <= 0:
            raise ValueError("concurrency, batch size and lease must be positive")
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
        # Wait for this many free slots before leasing again while jobs are running, so a busy
        # worker leases in batches instead of one row per finished job.
        self.refill_at = max(1, min(batch_size, concurrency) // 2)
        self.jobs_run = 0
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._inflight: dict[asyncio.Task[None], LeasedJob] = {}
        self._deadlines: dict[asyncio.Task[None], asyncio.TimerHandle] = {}
        self._timed_out: set[asyncio.Task[None]] = set()
        self._done: list[Finished] = []
        self._metrics: dict[str, _JobMetrics] = {}
        self.last_turn = queue.clock.monotonic()
        """When the loop last came round (readiness reports a loop stuck longer)."""

    def stalled(self, now: float) -> bool:
        """True when the loop has not come round for far longer than it ever waits."""
        return now - self.last_turn > max(3 * self.poll_interval, STALL_SECONDS)

    def stop(self) -> None:
        """Stop leasing; :meth:`run` returns once in-flight jobs finished or were released."""
        self._stopping.set()
        self._wake.set()

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    async def run(self) -> None:
        log.info("worker %s started on queues %s", self.worker_id, ",".join(self.queues))
        unsubscribe = self.queue.subscribe(self._on_new_jobs)
        clock = self.queue.clock
        next_heartbeat = clock.monotonic() + self.lease_seconds / 3
        next_recovery = clock.monotonic()
        idle = False
        try:
            while not self._stopping.is_set():
                self.last_turn = clock.monotonic()
                try:
                    # Cleared before looking for work, so a wake-up that arrives meanwhile is kept.
                    self._wake.clear()
                    now = clock.monotonic()
                    if now >= next_heartbeat:
                        next_heartbeat = now + self.lease_seconds / 3
                        await self._heartbeat()
                    if now >= next_recovery:
                        next_recovery = now + self._recovery_interval()
                        await self._recover()
                    want = min(self.concurrency - len(self._inflight), self.batch_size)
                    if want > 0:
                        leased = await self._lease(want)
                        if len(leased) == want:
                            await asyncio.sleep(0)  # let the new jobs start, then lease again
                            continue
                    elif self._done and idle:
                        # Completions normally ride along with the next lease; when every slot
                        # stays busy for a whole poll interval, write them on their own.
                        await self._flush_done()
                except Exception:
                    # Nothing but a stop may end this loop: log, count, and go on after a pause.
                    log.exception("worker %s: loop error; going on", self.worker_id)
                    WORKER_LOOP_ERRORS.inc()
                idle = False
                try:
                    async with asyncio.timeout(self.poll_interval):
                        await self._wake.wait()
                except TimeoutError:
                    idle = True
        finally:
            unsubscribe()
            await self._shutdown()

    def _recovery_interval(self) -> float:
        return min(RECOVERY_INTERVAL_SECONDS, self.lease_seconds / 2)

    def _on_new_jobs(self) -> None:
        if len(self._inflight) < self.concurrency:
            self._wake.set()

    async def _lease(self, want: int) -> list[LeasedJob]:
        done, self._done = self._done, []
        try:
            leased = await self.queue.lease(
                self.worker_id, self.queues, want, self.lease_seconds, finished=done
            )
        except Exception:
            log.exception("leasing failed")
            self._done.extend(done)  # written with the next statement instead
            return []
        if leased:
            JOBS_LEASED.inc(len(leased))
            loop = asyncio.get_running_loop()
            for job in leased:
                spec = self.registry.specs.get(job.name)
                task = loop.create_task(self._execute(job, spec))
                self._inflight[task] = job
                if spec is not None:
                    # A plain timer per job: asyncio.timeout() costs several times more, and this
                    # loop runs for every job.
                    self._deadlines[task] = loop.call_later(
                        spec.timeout_seconds, self._time_out, task
                    )
                task.add_done_callback(self._finished)
        return leased

    def _time_out(self, task: asyncio.Task[None]) -> None:
        if not task.done():
            self._timed_out.add(task)
            task.cancel()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        deadline = self._deadlines.pop(task, None)
        if deadline is not None:
            deadline.cancel()
        self._timed_out.discard(task)
        free = self.concurrency - len(self._inflight)
        if free >= self.refill_at or not self._inflight:
            self._wake.set()

    async def _heartbeat(self) -> None:
        if not self._inflight:
            return
        try:
            await self.queue.extend_leases(self.worker_id, self.lease_seconds)
        except Exception:
            log.exception("could not extend the leases of worker %s", self.worker_id)

    async def _recover(self) -> None:
        try:
            recovered = await self.queue.recover_expired()
        except Exception:
            log.exception("lease recovery failed")
            return
        if recovered:
            log.warning("requeued %d jobs whose lease expired", recovered)

    def _job_metrics(self, name: str) -> _JobMetrics:
        metrics = self._metrics.get(name)
        if metrics is None:
            metrics = self._metrics[name] = _JobMetrics(name)
        return metrics

    async def _execute(self, job: LeasedJob, spec: JobSpec[Any] | None) -> None:
        metrics = self._job_metrics(job.name)
        if spec is None:
            # Retrying cannot help: no process running this code knows the job.
            await self._failed(job, f"no job named {job.name!r} is registered", None, metrics)
            return
        clock = self.queue.clock
        started = clock.monotonic()
        try:
            with correlate(job.id):
                await run_handler(spec, self.make_context(job.id, job.attempts), job.payload)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task not in self._timed_out:
                raise  # shutdown: the job is released
            task.uncancel()
            detail = f"timed out after {spec.timeout_seconds:g} s"
            await self._failed(job, detail, spec.retry_delay(job.attempts), metrics)
            return
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            await self._failed(job, detail, spec.retry_delay(job.attempts), metrics)
            return
        finally:
            elapsed = max(0.0, clock.monotonic() - started)
            metrics.duration.observe(elapsed)
        self.jobs_run += 1
        metrics.done.inc()
        self._done.append((job.id, job.attempts))
        log_job_done(job.id, job.name, job.attempts, elapsed)

    async def _failed(
        self, job: LeasedJob, error: str, delay: float | None, metrics: _JobMetrics
    ) -> None:
        retry_at = self.queue.clock.now() + timedelta(seconds=delay or 0)
        try:
            dead = await self.queue.fail(job, error, retry_at, give_up=delay is None)
        except Exception:
            # The lease will expire and the job run again: at-least-once, never lost.
            log.exception("could not record the failure of job %s", job.id)
            return
        (metrics.dead if dead else metrics.retry).inc()
        log_job_failed(job.id, job.name, job.attempts, error, dead=dead)

    async def _flush_done(self) -> None:
        done, self._done = self._done, []
        if not done:
            return
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
                try:
                    await self.queue.release(unfinished)
                    log.info("released %d unfinished jobs", len(unfinished))
                except Exception:
                    log.exception(
                        "could not release %d jobs; their leases will expire", len(unfinished)
                    )
        await self._flush_done()
