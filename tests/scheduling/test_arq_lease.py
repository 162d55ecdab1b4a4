"""Jobs on arq hold a short in-progress lease that their worker renews while they run
(app/scheduling/arq_lease.py; ``JOB_LEASE_SECONDS``, PL-15's queue settings), instead of arq's
one TTL of the longest job timeout plus 10 s: a dead worker's job is free again within a lease
(the SIGKILL test is tests/scheduling/test_bulk_kill.py). A worker that finds its job's lease
taken over stops that attempt and leaves the job's keys to the attempt that took it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from litestar import get
from litestar.params import FromPath
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from app.sandbox.base import SandboxState, serve_in_loop, simulator_app
from app.scheduling.arq_queue import ArqQueue
from tests.conftest import TEST_REDIS_URL, eventually
from tests.scheduling.conftest import Runtimes, arq_workers
from tests.scheduling.helpers import commands_seen, running, worked_through
from tests.scheduling.testjobs import CALL_OUT, RECORD, RUNS, CallOut, Work

pytestmark = pytest.mark.redis

LEASE_SECONDS = 1.5


def _leases_lost() -> float:
    return REGISTRY.get_sample_value("sweepline_job_leases_lost_total") or 0.0


async def _true(value: bool) -> bool:
    return value


async def test_a_running_job_holds_a_lease_of_its_own_renewed_while_it_runs(
    runtimes: Runtimes,
) -> None:
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    key = f"leased-{id(RUNS):x}"
    await queue.enqueue(None, RECORD, Work(key=key, wait_for_release=True), job_id=key)
    in_progress = f"arq:in-progress:{queue.job_key(key)}"
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        async with running(arq_workers(runtime, lease_seconds=LEASE_SECONDS)):
            await eventually(lambda: _true(RUNS.started[key] == 1))
            first = await client.pttl(in_progress)
            # The job's own timeout is 300 s: arq alone would have set 310 s.
            assert 0 < first <= LEASE_SECONDS * 1000
            seen = [first]

            async def renewed() -> bool:
                seen.append(await client.pttl(in_progress))
                return seen[-1] > seen[-2]

            # Real time passing: the worker's heartbeat renews the lease every third of it.
            await eventually(renewed, timeout=30)
            RUNS.gate(key).set()
            await eventually(lambda: _true(RUNS.done[key] == 1))
            await worked_through(queue)
        assert await client.exists(in_progress) == 0
    finally:
        await client.aclose()
    assert RUNS.started[key] == 1


async def test_a_job_taken_over_by_another_worker_is_stopped_and_its_keys_left_alone(
    runtimes: Runtimes,
) -> None:
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    key = f"taken-{id(RUNS):x}"
    job = queue.job_key(key)
    await queue.enqueue(None, RECORD, Work(key=key, wait_for_release=True), job_id=key)
    lost_before = _leases_lost()
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        async with running(arq_workers(runtime, lease_seconds=LEASE_SECONDS)):
            await eventually(lambda: _true(RUNS.started[key] == 1))
            # What another worker's start does once the lease has run out (this one frozen
            # meanwhile): it marks the job in progress and counts one more attempt.
            await client.psetex(f"arq:in-progress:{job}", 60_000, b"1")
            await client.incr(f"arq:retry:{job}")

            async def stopped() -> bool:
                return _leases_lost() == lost_before + 1

            await eventually(stopped, timeout=30)
            await worked_through(queue)
            # The stopped attempt did not finish the job or drop its keys: they are the
            # other attempt's.
            assert RUNS.done[key] == 0
            assert await client.exists(f"arq:job:{job}") == 1
            assert await client.zscore(queue.queue_key("default"), job) is not None
            # The other worker dies in turn: its lease goes, and the job runs again, once.
            RUNS.gate(key).set()
            await client.delete(f"arq:in-progress:{job}")
            await eventually(lambda: _true(RUNS.done[key] == 1))
            await worked_through(queue)
    finally:
        await client.aclose()
    assert RUNS.started[key] == 2
    assert RUNS.attempts[key] == [1, 3]


async def test_a_poll_leaves_running_jobs_alone(runtimes: Runtimes) -> None:
    """A running job stays in arq's queue until it finishes, so every poll reads it again. The
    worker opens no transaction on it: its own running job it knows without asking, and about a
    job another worker holds it asks once per poll (one pipelined EXISTS), while a job whose
    lease is free still starts, and the held one as soon as its lease goes. Checked on the wire."""
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    mine, elsewhere = f"mine-{id(RUNS):x}", f"elsewhere-{id(RUNS):x}"
    mine_key = f"arq:in-progress:{queue.job_key(mine)}"
    elsewhere_key = f"arq:in-progress:{queue.job_key(elsewhere)}"
    await queue.enqueue(None, RECORD, Work(key=mine, wait_for_release=True), job_id=mine)
    await queue.enqueue(None, RECORD, Work(key=elsewhere), job_id=elsewhere)
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        await client.psetex(elsewhere_key, 60_000, b"1")  # what another worker's start sets
        async with running(arq_workers(runtime, poll_delay=0.02)):
            await eventually(lambda: _true(RUNS.started[mine] == 1))
            commands = await commands_seen(client, 1.0)
            queue_name = queue.queue_key("default")
            polls = [c for c in commands if c.startswith(f"ZRANGEBYSCORE {queue_name} ")]
            assert len(polls) >= 5  # the worker kept polling, and each poll read both jobs
            assert len([c for c in commands if c == f"EXISTS {elsewhere_key}"]) >= len(polls) - 1
            assert not [c for c in commands if c == f"EXISTS {mine_key}"]
            ours = f"WATCH arq:in-progress:{queue.job_key('')}"  # this test's queue's jobs
            assert not [c for c in commands if c.startswith(ours)]
            assert RUNS.started[elsewhere] == 0
            free = f"{mine}-free"
            await queue.enqueue(None, RECORD, Work(key=free), job_id=free)
            await eventually(lambda: _true(RUNS.done[free] == 1))
            await client.delete(elsewhere_key)  # the other worker's lease went
            await eventually(lambda: _true(RUNS.done[elsewhere] == 1))
            RUNS.gate(mine).set()
            await eventually(lambda: _true(RUNS.done[mine] == 1))
            await worked_through(queue)
    finally:
        await client.aclose()
    assert RUNS.started[mine] == 1


@pytest.fixture
async def simulator() -> AsyncIterator[tuple[SandboxState, str]]:
    state = SandboxState()

    @get("/call/{attempt:int}")
    async def call(attempt: FromPath[int]) -> dict[str, int]:
        state.hit(f"attempt {attempt}")
        return {"ok": 1}

    async with serve_in_loop(simulator_app([call])) as url:
        yield state, url


async def test_a_job_taken_over_on_arq_makes_no_further_outside_call(
    runtimes: Runtimes, simulator: tuple[SandboxState, str]
) -> None:
    """The job swallows its cancellation and goes on: what stops it is the outbound client
    refusing its next call, the permit revoked by the lease keeper (several queue names, so
    several arq workers share the job functions)."""
    state, url = simulator
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    key = f"arq-call-{id(RUNS):x}"
    job = queue.job_key(key)
    await queue.enqueue(None, CALL_OUT, CallOut(key=key, url=url, calls=2), job_id=key)
    lost_before = _leases_lost()
    client = Redis.from_url(TEST_REDIS_URL)
    # The job's queue last: its worker's functions were made after the other worker's.
    workers = arq_workers(runtime, lease_seconds=LEASE_SECONDS, queues=["priority", "default"])
    try:
        async with running(workers):
            await eventually(lambda: _true(state.count("attempt 1") == 1))
            await client.psetex(f"arq:in-progress:{job}", 60_000, b"1")
            await client.incr(f"arq:retry:{job}")
            await eventually(lambda: _true(_leases_lost() == lost_before + 1), timeout=30)
            RUNS.gate(f"{key}:1").set()  # the first attempt tries its next call
            await eventually(lambda: _true(RUNS.refused[key] == 1))
            RUNS.gate(f"{key}:3").set()
            await client.delete(f"arq:in-progress:{job}")
            await eventually(lambda: _true(RUNS.done[key] == 1))
    finally:
        await client.aclose()
    assert state.count("attempt 1") == 1, "no call after the lease was lost"
    assert state.count("attempt 3") == 2
    assert RUNS.cancelled[key] == 1


async def test_a_job_is_claimed_in_one_script_that_makes_arq_s_checks(runtimes: Runtimes) -> None:
    """The worker starts a job with one script (no WATCH transaction): it starts only a job that
    is in the queue, due, and not in progress elsewhere, and marks it in progress for a lease."""
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    workers = arq_workers(runtime, lease_seconds=LEASE_SECONDS)
    worker = workers.workers[0]
    held, later, gone, free = (f"{name}-{id(RUNS):x}" for name in ("held", "later", "gone", "free"))
    for key in (held, later, gone, free):
        await queue.enqueue(None, RECORD, Work(key=key), job_id=key)
    queue_name = queue.queue_key("default")
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        await client.psetex(f"arq:in-progress:{queue.job_key(held)}", 60_000, b"1")
        await client.zadd(queue_name, {queue.job_key(later): 2**50})  # due in a century
        await client.zrem(queue_name, queue.job_key(gone))  # finished meanwhile
        commands = asyncio.create_task(commands_seen(client, 1.0))
        await asyncio.sleep(0.2)
        # Past the poll's own check (a job held elsewhere is mostly skipped before a claim):
        # the script alone decides here, as when another worker takes the job in between.
        await worker._start([queue.job_key(k).encode() for k in (held, later, gone, free)])
        await asyncio.gather(*worker.tasks.values())
        seen = await commands
        assert [RUNS.started[k] for k in (held, later, gone, free)] == [0, 0, 0, 1]
        assert not [c for c in seen if c.startswith("WATCH")]
        assert len([c for c in seen if c.startswith("EVALSHA")]) >= 4
        assert worker.job_counter == 0  # each refused start gave its slot back
    finally:
        await client.aclose()
        await worker.pool.aclose()


async def test_workers_racing_on_one_queue_start_each_job_once(runtimes: Runtimes) -> None:
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    keys = [f"race-{n}-{id(RUNS):x}" for n in range(300)]
    for key in keys:
        await queue.enqueue(None, RECORD, Work(key=key), job_id=key)
    racing = [arq_workers(runtime, poll_delay=0.001, concurrency=20) for _ in range(4)]
    async with running(*racing):
        await eventually(lambda: _true(all(RUNS.done[k] == 1 for k in keys)), timeout=60)
        await worked_through(queue)
    assert {RUNS.started[k] for k in keys} == {1}
