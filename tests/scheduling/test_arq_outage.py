"""The arq backend while Redis is down: each call fails within REDIS_TIMEOUT_SECONDS as
QueueUnavailable (arq's create_pool waited out five retries, 5 s; a Redis that accepts and never
answers held a call for good), a unit of work that queues a job is rolled back, and the queue and
its workers carry on by themselves once Redis answers again, with one log line for the outage.

Redis down is real: a closed port (refused), a listener that never answers, and the test Redis
behind a loopback proxy that the tests stop and start."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import urlparse

import pytest
import redis.exceptions
from sqlalchemy import select

from app.clock import ManualClock, SystemClock
from app.db.session import Database
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.arq_workers import ArqWorkers
from app.scheduling.jobs import JobContext
from app.scheduling.models import SweeperState
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep, SweepRunner, sweeper_states
from app.scheduling.unavailable import QueueUnavailable
from tests.conftest import TEST_REDIS_URL, eventually
from tests.scheduling.conftest import Runtimes, arq_workers
from tests.scheduling.helpers import running
from tests.scheduling.redis_proxy import Proxy, closed_port, silent_port
from tests.scheduling.testjobs import RECORD, RUNS, Work

TIMEOUT = 0.5
BOUND = 3.0
"""Well under arq's old five retries (5 s), with room for a loaded machine."""


def arq_queue(db: Database, url: str) -> ArqQueue:
    return ArqQueue(db, SystemClock(), url, "sweepline-test-outage", timeout=TIMEOUT)


async def fails_fast(queue: ArqQueue, key: str) -> QueueUnavailable:
    started = time.monotonic()
    with pytest.raises(QueueUnavailable) as caught:
        await queue.enqueue(None, RECORD, Work(key=key))
    assert time.monotonic() - started < BOUND
    return caught.value


async def test_a_refused_connection_fails_each_call_at_once(shared_db: Database) -> None:
    queue = arq_queue(shared_db, f"redis://127.0.0.1:{closed_port()}/0")
    try:
        error = await fails_fast(queue, "refused")  # one try, no retries waited out
        assert error.status == 503
        assert error.code == "queue_unavailable"
        assert isinstance(error.__cause__, redis.exceptions.ConnectionError)
        started = time.monotonic()
        assert await queue.ping() is False
        with pytest.raises(QueueUnavailable):
            await queue.stats()
        assert time.monotonic() - started < BOUND
    finally:
        await queue.aclose()


async def test_a_redis_that_never_answers_fails_within_the_timeout(shared_db: Database) -> None:
    with silent_port() as port:
        queue = arq_queue(shared_db, f"redis://127.0.0.1:{port}/0")
        try:
            error = await fails_fast(queue, "silent")
            assert isinstance(error.__cause__, redis.exceptions.TimeoutError)
            # The calls right after it do not wait out the timeout again: they fail without
            # trying Redis (nothing caused their error), so a burst of requests does not pile up.
            for attempt in range(5):
                with pytest.raises(QueueUnavailable) as caught:
                    await queue.enqueue(None, RECORD, Work(key=f"burst-{attempt}"))
                assert caught.value.__cause__ is None
            assert await queue.ping() is False
        finally:
            await queue.aclose()


async def test_a_unit_of_work_that_queues_a_job_is_rolled_back(shared_db: Database) -> None:
    # Published after the commit, the job would be lost while the state that needs it stays.
    queue = arq_queue(shared_db, f"redis://127.0.0.1:{closed_port()}/0")

    async def queue_in_a_unit_of_work() -> None:
        async with shared_db.write() as uow:
            uow.session.add(SweeperState(name="outage.probe", ticks=0, failures=0))
            await uow.session.flush()
            await queue.enqueue(uow, RECORD, Work(key="in-uow"))

    try:
        with pytest.raises(QueueUnavailable, match="nothing was changed"):
            await queue_in_a_unit_of_work()
        async with shared_db.read() as session:
            rows = await session.execute(select(SweeperState.name))
            assert rows.scalars().all() == []
    finally:
        await queue.aclose()


async def test_sweeps_record_an_outage_without_a_traceback_each_tick(
    runtimes: Runtimes, manual: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runtime = runtimes.make("database", manual)
    queue = arq_queue(runtime.db, f"redis://127.0.0.1:{closed_port()}/0")
    name = f"test.outage.{uuid.uuid4().hex[:6]}"

    async def queues_a_job(ctx: JobContext, when: datetime) -> None:
        await queue.enqueue(None, RECORD, Work(key="from-a-sweep"))

    sweep = Sweep(name, EVERY_10_SECONDS, queues_a_job)
    sweeps = SweepRunner(
        runtime.db, manual, [sweep], runtime.context, owner="proc-a", lease_seconds=600
    )
    try:
        for seconds in (10, 20, 30):
            tick = datetime(2026, 3, 2, 9, 0, seconds, tzinfo=UTC)
            manual.set(tick)
            assert await sweeps.run_tick(sweep, tick)
    finally:
        await queue.aclose()
    (row,) = [s for s in await sweeper_states(runtime.db) if s.name == name]
    assert (row.ticks, row.failures) == (3, 3)
    assert row.last_error is not None
    assert row.last_error.startswith("QueueUnavailable: The job queue (Redis) is not reachable")
    assert [r for r in caplog.records if r.exc_info] == []
    assert outage_lines(caplog) == (1, 0)


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    if not TEST_REDIS_URL:
        pytest.skip("needs TEST_REDIS_URL")
    target = urlparse(TEST_REDIS_URL)
    made = Proxy(target.hostname or "127.0.0.1", target.port or 6379)
    await made.start()
    yield made
    await made.stop()


def outage_lines(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    records = [r for r in caplog.records if r.name == "app.scheduling.unavailable"]
    down = sum("is not reachable" in r.getMessage() for r in records)
    back = sum("answers again after" in r.getMessage() for r in records)
    return down, back


@pytest.mark.redis
async def test_the_queue_and_its_workers_carry_on_once_redis_is_back(
    runtimes: Runtimes, proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.scheduling.unavailable")
    runtime = runtimes.make("arq", redis_url=proxy.url, redis_timeout_seconds=TIMEOUT)
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    workers = arq_workers(runtime)
    async with running(workers):
        await queue.enqueue(None, RECORD, Work(key="before"))
        await eventually(lambda: _true(RUNS.done["before"] == 1))

        await proxy.stop()
        await fails_fast(queue, "during")
        assert await queue.ping() is False
        # The workers' polls fail too (every 20 ms); they wait for Redis instead of ending.
        await eventually(lambda: all_waiting(workers), timeout=BOUND)

        await proxy.start()
        await eventually(lambda: queued(queue, "after"))  # within a second or so, no restart
        await eventually(lambda: _true(RUNS.done["after"] == 1), timeout=20)
    assert RUNS.done["during"] == 0
    # One line when it goes, one when it is back, not one per failed poll. A loaded machine may
    # hold the watchdog's ping past the timeout once more, which is an outage of its own.
    down, back = outage_lines(caplog)
    assert 1 <= down <= 2, (down, back)
    assert 1 <= back <= 2, (down, back)


@pytest.mark.redis
async def test_workers_started_while_redis_is_down_begin_once_it_answers(
    runtimes: Runtimes, proxy: Proxy
) -> None:
    runtime = runtimes.make("arq", redis_url=proxy.url, redis_timeout_seconds=TIMEOUT)
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    await queue.enqueue(None, RECORD, Work(key="waiting"))
    await proxy.stop()
    workers = arq_workers(runtime)
    async with running(workers):
        # arq's worker would have ended at its first Redis call; ours wait for Redis.
        await eventually(lambda: all_waiting(workers), timeout=BOUND)
        await proxy.start()
        await eventually(lambda: _true(RUNS.done["waiting"] == 1), timeout=20)


@pytest.mark.redis
async def test_workers_shut_down_while_redis_is_down(runtimes: Runtimes, proxy: Proxy) -> None:
    runtime = runtimes.make("arq", redis_url=proxy.url, redis_timeout_seconds=TIMEOUT)
    workers = arq_workers(runtime)
    task = asyncio.create_task(workers.run())
    await queue_is_served(runtime.queue)
    await proxy.stop()
    await eventually(lambda: all_waiting(workers), timeout=BOUND)
    started = time.monotonic()
    await workers.shutdown()
    await asyncio.wait_for(task, BOUND)
    assert time.monotonic() - started < BOUND


@pytest.mark.redis
async def test_workers_notice_a_frozen_redis_and_carry_on_once_it_answers(
    runtimes: Runtimes, proxy: Proxy
) -> None:
    """The workers' clients have no timeout per command: their watchdog's ping, unanswered within
    the timeout, cuts their connections, and they wait for Redis as after a refused one."""
    runtime = runtimes.make("arq", redis_url=proxy.url, redis_timeout_seconds=TIMEOUT)
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    async with running(arq_workers(runtime)):
        await queue_is_served(queue)
        proxy.freeze()
        await eventually(lambda: _true(queue.outage.down), timeout=BOUND)
        proxy.thaw()
        await eventually(lambda: queued(queue, "thawed"))
        await eventually(lambda: _true(RUNS.done["thawed"] == 1), timeout=20)


@pytest.mark.redis
async def test_workers_shut_down_while_redis_is_frozen(runtimes: Runtimes, proxy: Proxy) -> None:
    runtime = runtimes.make("arq", redis_url=proxy.url, redis_timeout_seconds=TIMEOUT)
    workers = arq_workers(runtime)
    task = asyncio.create_task(workers.run())
    await queue_is_served(runtime.queue)
    proxy.freeze()
    await eventually(lambda: _true(proxy.held > 0), timeout=BOUND)  # a poll hangs in Redis
    started = time.monotonic()
    await workers.shutdown()
    await asyncio.wait_for(task, BOUND)
    assert time.monotonic() - started < BOUND
    proxy.thaw()


async def queue_is_served(queue: object) -> None:
    assert isinstance(queue, ArqQueue)
    await queue.enqueue(None, RECORD, Work(key="served"))
    await eventually(lambda: _true(RUNS.done["served"] == 1))


async def queued(queue: ArqQueue, key: str) -> bool:
    try:
        await queue.enqueue(None, RECORD, Work(key=key), job_id=f"{key}:{id(RUNS):x}")
    except QueueUnavailable:
        return False
    return True


async def all_waiting(workers: ArqWorkers) -> bool:
    """Every worker's loop met the outage and waits for Redis (rather than having ended)."""
    return workers.waiting_for_redis == len(workers.workers)


async def _true(value: bool) -> bool:
    return value
