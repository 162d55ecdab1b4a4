"""A worker that lost a job's lease stops before the job's next outside call (issue 11 item 2).

Two database-queue workers on one database (SQLite or PostgreSQL, whichever the session uses):
the first runs a job that calls a loopback simulator (HTTP) or an SMTP sink, then waits. The
job's lease runs out and the second worker takes the job over. The first worker's heartbeat finds
the lease gone: it revokes the job's call permit and cancels it. The job used here swallows the
cancellation and goes on, so what stops it is the outbound client itself refusing the call —
counted at the simulator, the first attempt makes no call after the takeover, the second makes
all of its own, and the job ends done once.

On arq the same holds for a job whose in-progress lease was taken over
(tests/scheduling/test_arq_lease.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import pytest
from litestar import get
from litestar.params import FromPath
from sqlalchemy import update

from app.clock import SystemClock
from app.db.session import Database
from app.sandbox.base import SandboxState, serve_in_loop, simulator_app
from app.sandbox.smtp import SmtpSink
from app.scheduling.models import JOB_DONE, JOB_QUEUED, JOB_RUNNING, Job
from app.scheduling.queue import DatabaseQueue
from tests.conftest import eventually
from tests.scheduling.conftest import Runtimes, database_worker
from tests.scheduling.helpers import job_row, running, wait_for_status
from tests.scheduling.test_worker_supervision import drop_lease_trigger, install_lease_trigger
from tests.scheduling.testjobs import CALL_OUT, RUNS, CallOut

LEASE = 6.0
"""The heartbeat comes every third of it. Long enough that the pauses of a loaded machine (a
renewal waiting for the write lock, a busy event loop) do not lose a lease by themselves: the
tests take leases away on purpose."""


@pytest.fixture
async def simulator() -> AsyncIterator[tuple[SandboxState, str]]:
    state = SandboxState()

    @get("/call/{attempt:int}")
    async def call(attempt: FromPath[int]) -> dict[str, int]:
        state.hit(f"attempt {attempt}")
        return {"ok": 1}

    async with serve_in_loop(simulator_app([call])) as url:
        yield state, url


async def _expire_until_requeued(db: Database, queue: DatabaseQueue, job_id: str) -> None:
    """The first worker's renewals stop reaching the database: its lease runs out and a
    recovery requeues the job (the heartbeat may renew it in between: try again then)."""

    async def requeued() -> bool:
        async with db.write() as uow:
            await uow.session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status == JOB_RUNNING, Job.attempts == 1)
                .values(lease_expires_at=queue.clock.now() - timedelta(seconds=1))
            )
        await queue.recover_expired()
        row = await job_row(db, job_id)
        assert row is not None
        return row.status == JOB_QUEUED or row.attempts >= 2

    await eventually(requeued)


def until(predicate: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return predicate()

    return check


async def _run_taken_over(
    runtimes: Runtimes, shared_db: Database, payload: CallOut, calls_of: Callable[[int], int]
) -> int:
    """Run ``payload`` on a first worker, let a second take it over; the job's final attempt."""
    runtime = runtimes.make("database", SystemClock())
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    # One slot and no buffer: the first worker cannot lease the requeued job itself.
    first = database_worker(runtime, lease_seconds=LEASE, concurrency=1, prefetch=0)
    second = database_worker(runtime, lease_seconds=LEASE)
    await queue.enqueue(None, CALL_OUT, payload, job_id="call-out")
    async with running(first):
        await eventually(until(lambda: calls_of(1) == 1))  # the first attempt's first call
        await _expire_until_requeued(shared_db, queue, "call-out")
        await eventually(until(lambda: first.leases_lost == 1))
        async with running(second):
            await eventually(until(lambda: calls_of(2) == 1))  # the second attempt took over
            RUNS.gate(f"{payload.key}:1").set()  # the first attempt tries its next call
            await eventually(until(lambda: RUNS.refused[payload.key] == 1))
            RUNS.gate(f"{payload.key}:2").set()
            row = await wait_for_status(shared_db, "call-out", JOB_DONE)
    return row.attempts


async def test_a_job_whose_lease_was_taken_makes_no_further_http_call(
    runtimes: Runtimes, shared_db: Database, simulator: tuple[SandboxState, str]
) -> None:
    state, url = simulator
    payload = CallOut(key="http", url=url, calls=2)
    attempts = await _run_taken_over(
        runtimes, shared_db, payload, lambda attempt: state.count(f"attempt {attempt}")
    )
    assert state.count("attempt 1") == 1, "no call after the lease was lost"
    assert state.count("attempt 2") == 2
    assert attempts == 2
    assert RUNS.cancelled["http"] == 1, "the heartbeat cancelled the first attempt"
    assert RUNS.done["http"] == 1


async def test_a_job_whose_lease_was_taken_sends_no_further_mail(
    runtimes: Runtimes, shared_db: Database
) -> None:
    with SmtpSink() as sink:

        def sent(attempt: int) -> int:
            return sum(1 for m in sink.snapshot() if m.subject == f"attempt {attempt}")

        payload = CallOut(key="smtp", smtp_port=sink.port, calls=2)
        attempts = await _run_taken_over(runtimes, shared_db, payload, sent)
        assert sent(1) == 1, "no message after the lease was lost"
        assert sent(2) == 2
    assert attempts == 2
    assert RUNS.done["smtp"] == 1


async def test_a_job_whose_lease_ran_out_unrenewed_makes_no_further_call(
    runtimes: Runtimes, shared_db: Database, simulator: tuple[SandboxState, str]
) -> None:
    """Renewals stop reaching the database (every UPDATE of the queue fails): once a lease has
    passed since the last confirmed renewal, another worker may take the job, so the worker
    stops it on its own clock — its next outside call is refused."""
    state, url = simulator
    runtime = runtimes.make("database", SystemClock())
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    worker = database_worker(runtime, lease_seconds=LEASE, concurrency=1, prefetch=0)
    await queue.enqueue(None, CALL_OUT, CallOut(key="stale", url=url), job_id="stale")
    try:
        async with running(worker):
            await eventually(until(lambda: state.count("attempt 1") == 1))
            await install_lease_trigger(shared_db)
            # A whole lease passes on the worker's clock before it gives the job up.
            await eventually(until(lambda: worker.leases_lost == 1), timeout=LEASE * 5)
            RUNS.gate("stale:1").set()
            await eventually(until(lambda: RUNS.refused["stale"] == 1))
    finally:
        await drop_lease_trigger(shared_db)
    assert state.count("attempt 1") == 1, "no call once the lease ran out"
    assert RUNS.done["stale"] == 0
