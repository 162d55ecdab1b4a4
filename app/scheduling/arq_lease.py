"""Short, heartbeat-renewed leases for jobs on arq, like the database queue's.

arq marks a job it starts with an in-progress key (``arq:in-progress:<id>``) and no other worker
starts the job while the key exists. arq gives that key one TTL for every job of a worker: its
longest function timeout plus 10 s. With the ad rules' 15-minute timeout beside the bulk jobs, a
worker that was SIGKILLed left every job it was running "in progress" for over 15 minutes: a
campaign's audience snapshot or a CSV import stood still that long.

Here the key lives for ``JOB_LEASE_SECONDS`` (30 by default) whatever the job, and the worker that
runs the job renews it every third of that while the job runs (:class:`LeaseKeeper`). A worker
that dies stops renewing, the key expires, and the next worker that polls starts the job again:
within one lease of the death, as on the database queue. A job's own timeout still bounds how long
one attempt may run (each function's ``timeout``).

A job whose lease is lost although its worker is alive — renewals found the key gone, or kept
failing for a whole lease (a frozen process, Redis unreachable) — may already run elsewhere: its
call permit is revoked (:mod:`app.scheduling.outside_calls`, so it makes no further outside call)
and its task is cancelled. That attempt then leaves the job's keys alone
(:meth:`LeasedWorker.finish_job`): they belong to the attempt that took it over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from arq import Worker
from arq.constants import in_progress_key_prefix, retry_key_prefix
from arq.utils import timestamp_ms

from app.db.session_kinds import JOB, session_kind
from app.scheduling.metrics import JOB_LEASES_LOST
from app.scheduling.outside_calls import CallPermit, calls_permitted_by

log = logging.getLogger(__name__)

_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
redis.call('PSETEX', KEYS[1], ARGV[3], '1')
return score
"""
"""Start a queued job unless another worker runs it, it has left the queue, or it is due later:
set its in-progress key and answer its score (arq's checks, its key, one round trip)."""


class LeasedWorker(Worker):
    """arq's worker with a short in-progress lease, a call permit per job, and no say over the
    keys of a job whose lease it lost."""

    def __init__(self, *args: Any, lease_seconds: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if lease_seconds <= 0:
            raise ValueError("the lease must be positive")
        # arq sets the in-progress key with this TTL when it starts a job (see module doc).
        self.in_progress_timeout_s = lease_seconds
        self.permits: dict[str, CallPermit] = {}
        """The call permit of each job this worker runs, by arq job id."""
        self.tries: dict[str, int] = {}
        """The attempt number of each job this worker runs: arq counts every start of a job in
        its retry key, so a later number there means another worker started the job since."""
        self.lost: set[str] = set()
        """Jobs stopped because their lease was lost: their keys are another attempt's now."""
        self._claim = self.pool.register_script(_CLAIM)
        # A copy per worker: the functions are shared by the workers of every queue name.
        self.functions = {
            name: dataclasses.replace(function, coroutine=self._permitted(function.coroutine))
            for name, function in self.functions.items()
        }

    def _permitted(self, coroutine: Any) -> Any:
        async def run(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            job_id = str(ctx.get("job_id", ""))
            permit = self.permits[job_id] = CallPermit()
            self.tries[job_id] = int(ctx.get("job_try", 1))
            try:
                with calls_permitted_by(permit), session_kind(JOB):
                    return await coroutine(ctx, *args, **kwargs)
            finally:
                self.permits.pop(job_id, None)
                self.tries.pop(job_id, None)

        return run

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        # arq tries to start every id its poll read, though a job stays in the queue until it
        # finishes: at every poll (every tenth of a second) it tried each running job again, here
        # or in another worker. Only the jobs this worker has room for and whose lease is free
        # are tried now; the claim script still decides which worker starts a job that two of
        # them found free.
        await self._start(await self._lease_free(job_ids))

    async def _start(self, job_ids: list[bytes]) -> None:
        """arq's ``start_jobs`` with each job claimed in one script instead of a watched
        transaction (``WATCH``, ``EXISTS``, ``ZSCORE``, ``MULTI``/``PSETEX``/``EXEC``: four round
        trips a job, the larger part of a no-op job's cost): the script makes the same checks and
        sets the same key atomically, in one."""
        for job_id_b in job_ids:
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            job_id = job_id_b.decode()
            score = await self._claim(
                keys=[in_progress_key_prefix + job_id, self.queue_name],
                args=[job_id, timestamp_ms(), int(self.in_progress_timeout_s * 1000)],
                client=self.pool,
            )
            if score is None:  # started elsewhere, finished, or deferred by a retry since
                self.job_counter -= 1
                self.sem.release()
                log.debug("job %s already running elsewhere", job_id)
                continue
            task = self.loop.create_task(self.run_job(job_id, int(float(score))))
            task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[job_id] = task

    async def _lease_free(self, job_ids: list[bytes]) -> list[bytes]:
        """The first jobs of ``job_ids`` this worker has room for that no worker runs: its own
        running jobs are known here, the others' leases are asked about a room's worth at a time
        (one pipelined ``EXISTS`` per chunk)."""
        running = {job_id for job_id, task in self.tasks.items() if not task.done()}
        waiting = [job_id for job_id in job_ids if job_id.decode() not in running]
        free: list[bytes] = []
        while waiting and (room := self.max_jobs - self.job_counter - len(free)) > 0:
            chunk, waiting = waiting[:room], waiting[room:]
            async with self.pool.pipeline(transaction=False) as pipe:
                for job_id in chunk:
                    pipe.exists(in_progress_key_prefix + job_id.decode())
                held = await pipe.execute()
            free.extend(job_id for job_id, taken in zip(chunk, held, strict=True) if not taken)
        return free

    def running(self) -> list[str]:
        """Ids of the jobs whose handler is running now."""
        return [job_id for job_id, task in self.job_tasks.items() if not task.done()]

    def stop_lost(self, job_id: str, why: str) -> None:
        """Stop a running job whose lease is lost (see module doc)."""
        task = self.job_tasks.get(job_id)
        if task is None or task.done() or job_id in self.lost:
            return
        reason = f"job {job_id} stopped: {why}"
        permit = self.permits.get(job_id)
        if permit is not None:
            permit.revoke(reason)
        self.lost.add(job_id)
        JOB_LEASES_LOST.inc()
        log.warning(reason)
        task.cancel()

    async def finish_job(self, job_id: str, *args: Any, **kwargs: Any) -> None:
        if job_id in self.lost:
            self.lost.discard(job_id)
            return
        await super().finish_job(job_id, *args, **kwargs)

    async def finish_failed_job(self, job_id: str, *args: Any, **kwargs: Any) -> None:
        if job_id in self.lost:
            self.lost.discard(job_id)
            return
        await super().finish_failed_job(job_id, *args, **kwargs)


class LeaseKeeper:
    """Renews the in-progress keys of the jobs that ``workers`` run, every third of a lease."""

    def __init__(
        self,
        workers: Sequence[LeasedWorker],
        lease_seconds: float,
        monotonic: Callable[[], float],
    ) -> None:
        self.workers = list(workers)
        self.lease_seconds = lease_seconds
        self.monotonic = monotonic
        self._confirmed: dict[tuple[int, str], float] = {}
        """When each running job's lease was last confirmed (started or renewed), monotonic."""

    async def run(self) -> None:
        while True:
            try:
                await self.renew()
            except Exception:
                log.exception("renewing the arq jobs' leases failed; going on")
            await asyncio.sleep(self.lease_seconds / 3)

    async def renew(self) -> None:
        for index, worker in enumerate(self.workers):
            await self._renew(index, worker)

    async def _renew(self, index: int, worker: LeasedWorker) -> None:
        at = self.monotonic()
        job_ids = worker.running()
        for key in [k for k in self._confirmed if k[0] == index and k[1] not in job_ids]:
            del self._confirmed[key]
        if not job_ids:
            return
        for job_id in job_ids:
            # A job seen for the first time was started (its key set) at most a period ago.
            self._confirmed.setdefault((index, job_id), at)
        try:
            async with worker.pool.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    pipe.pexpire(in_progress_key_prefix + job_id, int(self.lease_seconds * 1000))
                    pipe.get(retry_key_prefix + job_id)
                answers = await pipe.execute()
        except Exception as exc:  # Redis not answering: the leases run out on their own
            log.warning("could not renew the leases of %d arq jobs: %s", len(job_ids), exc)
            for job_id in job_ids:
                if at - self._confirmed[(index, job_id)] >= self.lease_seconds:
                    lease = f"{self.lease_seconds:g} s unrenewed"
                    worker.stop_lost(job_id, f"its lease expired ({lease})")
            return
        still_running = set(worker.running())
        for n, job_id in enumerate(job_ids):
            found, tries = answers[2 * n], answers[2 * n + 1]
            ours = worker.tries.get(job_id)
            if found and (ours is None or tries is None or int(tries) == ours):
                self._confirmed[(index, job_id)] = at
            elif job_id in still_running:
                # The key expired while the job ran, or another worker started the job since
                # (arq counted a later attempt): the job may run elsewhere now.
                worker.stop_lost(job_id, "its lease expired or was taken over by another worker")
