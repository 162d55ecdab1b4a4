"""The promises both queue backends keep, with the same job functions on each: the database queue
always, arq on Redis when ``TEST_REDIS_URL`` is set."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from redis.asyncio import Redis

from app.runtime import Runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.models import JOB_DONE
from tests.conftest import TEST_REDIS_URL, eventually
from tests.scheduling.conftest import BACKENDS, Runtimes, arq_workers, database_worker
from tests.scheduling.helpers import count_jobs, running, worked_through
from tests.scheduling.testjobs import RECORD, RECORD_FAST_RETRY, RUNS, Work

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


def workers_for(runtime: Runtime) -> Any:
    if isinstance(runtime.queue, ArqQueue):
        return arq_workers(runtime)
    return database_worker(runtime)


async def visible(runtime: Runtime, job_id: str) -> bool:
    """Whether a consumer could see the job (a queued row, or an arq job in Redis)."""
    if isinstance(runtime.queue, ArqQueue):
        client = Redis.from_url(TEST_REDIS_URL)
        try:
            return bool(await client.exists(f"arq:job:{runtime.queue.job_key(job_id)}"))
        finally:
            await client.aclose()
    return await count_jobs(runtime.db, id=job_id) == 1


def unique(backend: str, name: str) -> str:
    # arq keeps job keys in one Redis namespace: ids must not collide with other test runs.
    return f"{name}:{id(RUNS):x}:{backend}"


async def test_the_same_job_functions_run_on_this_backend(backend: str, runtimes: Runtimes) -> None:
    runtime = runtimes.make(backend)
    for i in range(20):
        await runtime.queue.enqueue(None, RECORD, Work(key=f"j{i}"))
    async with running(workers_for(runtime)):
        await eventually(lambda: _true(sum(RUNS.done.values()) == 20))
    assert set(RUNS.started.values()) == {1}
    assert set(RUNS.done.values()) == {1}


async def test_a_repeated_job_id_runs_once_also_after_the_job_finished(
    backend: str, runtimes: Runtimes
) -> None:
    runtime = runtimes.make(backend)
    job_id = unique(backend, "dedup")
    await runtime.queue.enqueue(None, RECORD, Work(key="dedup"), job_id=job_id)
    await runtime.queue.enqueue(None, RECORD, Work(key="dedup"), job_id=job_id)
    async with running(workers_for(runtime)):
        await eventually(lambda: _true(RUNS.done["dedup"] == 1))
        await runtime.queue.enqueue(None, RECORD, Work(key="dedup"), job_id=job_id)
        await worked_through(runtime.queue)
    assert RUNS.started["dedup"] == 1


async def test_a_job_enqueued_in_a_unit_of_work_that_rolls_back_never_runs(
    backend: str, runtimes: Runtimes
) -> None:
    runtime = runtimes.make(backend)
    dropped, kept = unique(backend, "dropped"), unique(backend, "kept")

    async def change_of_mind() -> None:
        async with runtime.db.write() as uow:
            await runtime.queue.enqueue(uow, RECORD, Work(key="dropped"), job_id=dropped)
            raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError, match="changed my mind"):
        await change_of_mind()
    async with runtime.db.write() as uow:
        await runtime.queue.enqueue(uow, RECORD, Work(key="kept"), job_id=kept)
        assert not await visible(runtime, kept), "nothing is visible before the commit"
    assert await visible(runtime, kept)
    assert not await visible(runtime, dropped)
    async with running(workers_for(runtime)):
        await eventually(lambda: _true(RUNS.done["kept"] == 1))
        await worked_through(runtime.queue)
    assert RUNS.started["dropped"] == 0


async def test_retries_with_backoff_then_dead_with_the_last_error(
    backend: str, runtimes: Runtimes
) -> None:
    """Real time here (arq keeps its own clock); the ManualClock version is in
    test_database_queue.py."""
    runtime = runtimes.make(backend)
    job_id = unique(backend, "doomed")
    work = Work(key="doomed", fail_until_attempt=99)
    await runtime.queue.enqueue(None, RECORD_FAST_RETRY, work, job_id=job_id)
    async with running(workers_for(runtime)):

        async def dead() -> bool:
            return bool(await runtime.queue.dead_jobs())

        await eventually(dead, timeout=15)
    (job,) = await runtime.queue.dead_jobs()
    assert (job.id, job.attempts) == (job_id, RECORD_FAST_RETRY.max_tries)
    assert job.last_error == "RuntimeError: boom at attempt 2"
    assert RUNS.attempts["doomed"] == [1, 2]
    first, second = RUNS.times["doomed"]
    assert second - first >= RECORD_FAST_RETRY.backoff_seconds * 0.9
    assert await count_jobs(runtime.db, status=JOB_DONE) == 0


async def test_each_job_logs_one_line_and_runs_under_its_id_as_correlation_id(
    backend: str, runtimes: Runtimes, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = runtimes.make(backend)
    job_id = unique(backend, "traced")
    await runtime.queue.enqueue(None, RECORD, Work(key="traced"), job_id=job_id)
    with caplog.at_level(logging.INFO, logger="app.jobs"):
        async with running(workers_for(runtime)):
            await eventually(lambda: _true(RUNS.done["traced"] == 1))
    assert RUNS.correlation["traced"] == job_id
    (line,) = [r for r in caplog.records if r.name == "app.jobs" and r.getMessage() == "job done"]
    assert (line.job, line.job_id, line.attempt) == ("test.record", job_id, 1)  # type: ignore[attr-defined]


async def test_many_jobs_enqueued_in_one_unit_of_work_exist_only_once_it_commits(
    backend: str, runtimes: Runtimes
) -> None:
    runtime = runtimes.make(backend)
    dropped = [(RECORD, Work(key=f"dropped{i}"), unique(backend, f"dropped{i}")) for i in range(3)]
    kept = [(RECORD, Work(key=f"kept{i}"), unique(backend, f"kept{i}")) for i in range(3)]

    async def change_of_mind() -> None:
        async with runtime.db.write() as uow:
            await runtime.queue.enqueue_many(uow, dropped)
            raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError):
        await change_of_mind()
    async with runtime.db.write() as uow:
        await runtime.queue.enqueue_many(uow, kept)
    assert [await visible(runtime, job_id) for _, _, job_id in kept] == [True] * 3
    assert [await visible(runtime, job_id) for _, _, job_id in dropped] == [False] * 3
    async with running(workers_for(runtime)):
        await eventually(lambda: _true(sum(RUNS.done.values()) == 3))
    assert RUNS.done == {"kept0": 1, "kept1": 1, "kept2": 1}


async def test_lower_priority_values_run_first_among_a_queue_s_due_jobs(
    backend: str, runtimes: Runtimes
) -> None:
    runtime = runtimes.make(backend)
    queue = runtime.queue
    await queue.enqueue(
        None, RECORD, Work(key="later"), job_id=unique(backend, "later"), priority=1
    )
    await queue.enqueue(None, RECORD, Work(key="plain"), job_id=unique(backend, "plain"))
    urgent = [(RECORD, Work(key=k), unique(backend, k)) for k in ("urgent_a", "urgent_b")]
    await queue.enqueue_many(None, urgent, priority=-1)
    await queue.enqueue(
        None, RECORD, Work(key="first"), job_id=unique(backend, "first"), priority=-2
    )
    # One job at a time: the order they start in is the order the queue hands them out.
    one_at_a_time = (
        arq_workers(runtime, concurrency=1)
        if isinstance(queue, ArqQueue)
        else database_worker(runtime, concurrency=1, batch_size=1, prefetch=0)
    )
    async with running(one_at_a_time):
        await eventually(lambda: _true(sum(RUNS.done.values()) == 5))
    order = sorted(RUNS.times, key=lambda key: RUNS.times[key][0])
    assert order[0] == "first"
    assert set(order[1:3]) == {"urgent_a", "urgent_b"}
    assert order[3:] == ["plain", "later"]


async def _true(value: bool) -> bool:
    return value
