"""The database-queue worker: lease in batches, run concurrently, complete in batches.

Leasing many rows per statement, and writing the finished jobs of one batch in the same statement
that leases the next, is what makes the queue fast; each job still runs in its own units of work, so
one job's failure never touches another. Leased jobs wait in a small local buffer (``prefetch``)
beside the running ones, so a slot that frees starts the next job at once instead of waiting for a
lease round trip. Outcomes are written in groups: completions ride along with the next lease, and
whatever a lease has not taken within ``flush_seconds`` (completions and failed attempts alike) is
written in one statement per kind, as it is on stop. The loop wakes only when there is something to
do: the buffer running low, jobs committed in this process, a stop, or the poll interval.

While jobs run or wait in the buffer, the worker extends their leases (a heartbeat), so only a
worker that really stopped loses its jobs to another one. A job whose lease is lost all the same —
the renewal no longer finds it (it expired and another worker took it), or renewals kept failing
for longer than a lease — is stopped: its call permit is revoked, so the outbound HTTP clients and
the SMTP senders refuse its next outside call (:mod:`app.scheduling.outside_calls`), and its task
is cancelled. Its outcome is not recorded: the job belongs to the attempt that took it over. A job whose outcome is not written yet
when the process dies runs again after its lease expires (at-least-once, never lost). On stop: no
more leasing, buffered jobs are released at once, in-flight jobs get a grace period, then the rest
are cancelled and released without counting the attempt, and the outcomes are flushed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import traceback
from collections import deque
from collections.abc import Callable
from contextvars import copy_context
from datetime import timedelta
from typing import Any

from app.db.session_kinds import CLAIM, set_session_kind
from app.scheduling.deadlines import SharedDeadlines
from app.scheduling.job_statements import Finished
from app.scheduling.jobs import (
    JobContext,
    JobRegistry,
    JobSpec,
    log_job_done,
    log_job_failed,
    run_handler,
)
from app.scheduling.metrics import (
    JOB_LEASES_LOST,
    JOBS_LEASED,
    WORKER_LOOP_ERRORS,
)
from app.scheduling.outside_calls import CallPermit
from app.scheduling.queue import (
    DatabaseQueue,
    FailedAttempt,
    LeasedJob,
    failed_attempt,
)
from app.scheduling.running_job import JobMetrics, RunningJob, enter_job

log = logging.getLogger(__name__)

RECOVERY_INTERVAL_SECONDS = 5.0
"""How often each worker requeues jobs whose lease expired (at most; see ``_recovery_interval``)."""


FLUSH_SECONDS = 0.02
"""Longest an outcome waits for a lease to carry it before it is written on its own: short, so a
finished job is rarely run again after a crash, and long enough to gather many outcomes."""

STALL_SECONDS = 60.0
"""A worker loop that has not come round for this long (or three poll intervals) is stalled: one
turn waits at most a poll interval plus one lease statement (which may wait on a busy lock)."""


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
        prefetch: int = 0,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        if concurrency < 1 or batch_size < 1 or lease_seconds <= 0:
            raise ValueError("concurrency, batch size and lease must be positive")
        if prefetch < 0 or flush_seconds <= 0:
            raise ValueError("prefetch cannot be negative and the flush interval must be positive")
        self.queue = queue
        self.registry = registry
        self.make_context = make_context
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.shutdown_grace = shutdown_grace
        self.queues = queues or registry.queues
        self.prefetch = prefetch
        self.flush_seconds = flush_seconds
        self.worker_id = f"{worker_identity()}:{id(self):x}"
        # Wait for this much room (free slots plus free buffer places) before leasing again while
        # jobs are running, so a busy worker leases in batches instead of one row per finished job.
        self.refill_at = max(1, min(batch_size, concurrency + prefetch) // 2)
        self.jobs_run = 0
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._inflight: dict[asyncio.Task[None], RunningJob] = {}
        self._deadlines = SharedDeadlines(self._timed_out)
        self._confirmed: dict[Finished, float] = {}
        """When each held job's lease was last confirmed (leased or renewed), monotonic."""
        self.leases_lost = 0
        self._buffer: deque[LeasedJob] = deque()
        self._done: list[Finished] = []
        self._failures: list[tuple[FailedAttempt, JobMetrics, str]] = []
        self._flush_due = asyncio.Event()
        self._metrics: dict[str, JobMetrics] = {}
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

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def _room(self) -> int:
        """Jobs the next lease may take: free slots plus free buffer places, at most a batch."""
        free = self.concurrency - len(self._inflight) + self.prefetch - len(self._buffer)
        return min(free, self.batch_size)

    async def run(self) -> None:
        # The loop's own sessions (leases, renewals, recovery, outcomes) are claims: a stalled
        # holder of a job row makes them give up and go on (app/db/session_kinds.py). Each job's
        # task is a job session (enter_job).
        set_session_kind(CLAIM)
        log.info("worker %s started on queues %s", self.worker_id, ",".join(self.queues))
        unsubscribe = self.queue.subscribe(self._on_new_jobs)
        clock = self.queue.clock
        next_heartbeat = clock.monotonic() + self.lease_seconds / 3
        next_recovery = clock.monotonic()
        flusher = asyncio.create_task(self._flush_loop(), name="worker-flush")
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
                    want = self._room()
                    if want > 0:
                        leased = await self._lease(want)
                        if len(leased) == want:
                            # Let the new jobs start, then lease again at once if a whole batch
                            # fits; otherwise the finishing jobs wake the loop once there is room
                            # for one (a lease of the few places left is a statement for little).
                            await asyncio.sleep(0)
                            if self._room() >= self.batch_size:
                                continue
                except Exception:
                    # Nothing but a stop may end this loop: log, count, and go on after a pause.
                    log.exception("worker %s: loop error; going on", self.worker_id)
                    WORKER_LOOP_ERRORS.inc()
                try:
                    async with asyncio.timeout(self.poll_interval):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            unsubscribe()
            # Not cancelled: a flush cut short would lose the outcomes it had taken.
            self._flush_due.set()
            await asyncio.gather(flusher, return_exceptions=True)
            await self._shutdown()

    def _recovery_interval(self) -> float:
        return min(RECOVERY_INTERVAL_SECONDS, self.lease_seconds / 2)

    def _on_new_jobs(self) -> None:
        if self._room() > 0:
            self._wake.set()

    async def _lease(self, want: int) -> list[LeasedJob]:
        done, self._done = self._done, []
        self._publish_metrics()
        try:
            leased = await self.queue.lease(
                self.worker_id, self.queues, want, self.lease_seconds, finished=done
            )
        except Exception:
            log.exception("leasing failed")
            WORKER_LOOP_ERRORS.inc()
            self._done.extend(done)  # written with the next statement instead
            return []
        if leased:
            JOBS_LEASED.inc(len(leased))
            at = self.queue.clock.monotonic()
            for job in leased:
                self._confirmed[(job.id, job.attempts)] = at
            self._buffer.extend(leased)
            self._start_buffered()
        return leased

    def _start_buffered(self) -> None:
        """Start buffered jobs while slots are free (not once stopping: those are released)."""
        if self._stopping.is_set():
            return
        loop = asyncio.get_running_loop()
        specs = self.registry.specs
        while self._buffer and len(self._inflight) < self.concurrency:
            job = self._buffer.popleft()
            spec = specs.get(job.name)
            running = RunningJob(job, CallPermit(), self._job_metrics(job.name))
            # The job's task runs in a context of its own that already carries its correlation id
            # and call permit: cheaper than entering two context managers inside every job.
            context = copy_context()
            context.run(enter_job, job.id, running.permit)
            task = loop.create_task(self._execute(running, spec), context=context)
            self._inflight[task] = running
            if spec is not None:
                running.deadline = self._deadlines.arm(loop, task, spec.timeout_seconds)
            task.add_done_callback(self._finished)

    def _timed_out(self, task: asyncio.Task[None]) -> None:
        running = self._inflight.get(task)
        if running is not None:
            running.timed_out = True
            task.cancel()

    def _finished(self, task: asyncio.Task[None]) -> None:
        running = self._inflight.pop(task, None)
        if running is not None:
            job = running.job
            self._confirmed.pop((job.id, job.attempts), None)
            if running.deadline is not None:
                self._deadlines.disarm(running.deadline, task)
        self._start_buffered()
        if self._room() >= self.refill_at or not self._inflight:
            self._wake.set()

    async def _heartbeat(self) -> None:
        if not self._inflight and not self._buffer:
            return
        # Taken before the renewal: the expiry the database records is at least this late.
        at = self.queue.clock.monotonic()
        try:
            held = await self.queue.extend_leases(self.worker_id, self.lease_seconds)
        except Exception:
            log.exception("could not extend the leases of worker %s", self.worker_id)
            WORKER_LOOP_ERRORS.inc()
            self._stop_expired(at)
            return
        for key in held:
            self._confirmed[key] = at
        self._stop_lost(held)

    def _stop_lost(self, held: set[Finished]) -> None:
        """Stop the jobs the renewal no longer found: another worker (or a later attempt) has
        them now. Buffered ones are dropped before they start."""
        for job in [j for j in self._buffer if (j.id, j.attempts) not in held]:
            self._buffer.remove(job)
            self._confirmed.pop((job.id, job.attempts), None)
            log.warning(
                "job %s (attempt %d) lost its lease before it started", job.id, job.attempts
            )
        for task, running in list(self._inflight.items()):
            job = running.job
            if (job.id, job.attempts) not in held:
                self._stop(task, running, "its lease was taken over by another worker")

    def _stop_expired(self, now: float) -> None:
        """Renewals are failing: stop the jobs whose last confirmed lease has run out on this
        process's clock (another worker may take them from now on)."""
        for task, running in list(self._inflight.items()):
            job = running.job
            confirmed = self._confirmed.get((job.id, job.attempts), now)
            if now - confirmed >= self.lease_seconds:
                self._stop(task, running, f"its lease expired ({self.lease_seconds:g} s unrenewed)")

    def _stop(self, task: asyncio.Task[None], running: RunningJob, why: str) -> None:
        if running.lost or task.done():
            return
        job = running.job
        reason = f"job {job.id} (attempt {job.attempts}) stopped: {why}"
        running.permit.revoke(reason)
        running.lost = True
        self.leases_lost += 1
        JOB_LEASES_LOST.inc()
        log.warning(reason)
        task.cancel()

    async def _recover(self) -> None:
        try:
            recovered = await self.queue.recover_expired()
        except Exception:
            log.exception("lease recovery failed")
            WORKER_LOOP_ERRORS.inc()
            return
        if recovered:
            log.warning("requeued %d jobs whose lease expired", recovered)

    def _job_metrics(self, name: str) -> JobMetrics:
        metrics = self._metrics.get(name)
        if metrics is None:
            metrics = self._metrics[name] = JobMetrics(name)
        return metrics

    async def _execute(self, running: RunningJob, spec: JobSpec[Any] | None) -> None:
        job, metrics = running.job, running.metrics
        if spec is None:
            # Retrying cannot help: no process running this code knows the job.
            await self._failed(job, f"no job named {job.name!r} is registered", None, metrics)
            return
        clock = self.queue.clock
        started = clock.monotonic()
        try:
            # The task's context carries the job's correlation id and call permit (see
            # _start_buffered).
            await run_handler(spec, self.make_context(job.id, job.attempts), job.payload)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if running.lost and task is not None:
                # Stopped for a lost lease: the attempt that took the job over records it.
                task.uncancel()
                return
            if task is None or not running.timed_out:
                raise  # shutdown: the job is released
            task.uncancel()
            detail = f"timed out after {spec.timeout_seconds:g} s"
            await self._failed(job, detail, spec.retry_delay(job.attempts), metrics)
            return
        except Exception as exc:
            if running.permit.revoked:
                return  # e.g. the LeaseLost of a refused outside call: not this attempt's to record
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            await self._failed(job, detail, spec.retry_delay(job.attempts), metrics)
            return
        finally:
            elapsed = max(0.0, clock.monotonic() - started)
            metrics.duration.observe(elapsed)
        self.jobs_run += 1
        metrics.done_unpublished += 1
        self._done.append((job.id, job.attempts))
        self._flush_due.set()
        log_job_done(job.id, job.name, job.attempts, elapsed)

    async def _failed(
        self, job: LeasedJob, error: str, delay: float | None, metrics: JobMetrics
    ) -> None:
        retry_at = self.queue.clock.now() + timedelta(seconds=delay or 0)
        failed = failed_attempt(job, error, retry_at, give_up=delay is None)
        self._failures.append((failed, metrics, job.name))
        self._flush_due.set()

    async def _flush_loop(self) -> None:
        """Write the outcomes a lease has not carried within ``flush_seconds``."""
        while not self._stopping.is_set():
            await self._flush_due.wait()
            if self._stopping.is_set():
                return  # the shutdown writes the rest
            await asyncio.sleep(self.flush_seconds)
            self._flush_due.clear()
            try:
                await self._flush()
            except Exception:
                log.exception("worker %s: flushing outcomes failed; going on", self.worker_id)

    async def _flush(self) -> None:
        await self._flush_done()
        await self._flush_failures()

    async def _flush_failures(self) -> None:
        failures, self._failures = self._failures, []
        if not failures:
            return
        try:
            await self.queue.fail_many([failed for failed, _, _ in failures])
        except Exception:
            # The leases will expire and the jobs run again: at-least-once, never lost.
            log.exception("could not record %d failed attempts", len(failures))
            return
        for failed, metrics, name in failures:
            (metrics.dead if failed.dead else metrics.retry).inc()
            log_job_failed(failed.id, name, failed.attempts, failed.error, dead=failed.dead)

    def _publish_metrics(self) -> None:
        for metrics in self._metrics.values():
            metrics.publish()

    async def _flush_done(self) -> None:
        self._publish_metrics()
        done, self._done = self._done, []
        if not done:
            return
        try:
            await self.queue.complete(done)
        except Exception:
            log.exception("could not record %d finished jobs", len(done))
            self._done.extend(done)

    async def _shutdown(self) -> None:
        buffered = list(self._buffer)
        self._buffer.clear()
        if buffered:
            await self._release(buffered)
        if self._inflight:
            log.info("waiting up to %.0f s for %d jobs", self.shutdown_grace, len(self._inflight))
            _, pending = await asyncio.wait(set(self._inflight), timeout=self.shutdown_grace)
            unfinished = [self._inflight[t].job for t in pending]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if unfinished:
                await self._release(unfinished)
        await self._flush()
        self._deadlines.cancel()

    async def _release(self, jobs: list[LeasedJob]) -> None:
        try:
            await self.queue.release(jobs)
            log.info("released %d unfinished jobs", len(jobs))
        except Exception:
            log.exception("could not release %d jobs; their leases will expire", len(jobs))
