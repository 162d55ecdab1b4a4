"""The durable database queue (SQLite or PostgreSQL, whichever the session runs on): leasing,
lease expiry and heartbeats, retries with backoff on a ManualClock, dead jobs, deduplication."""

from __future__ import annotations

from datetime import timedelta

from app.clock import ManualClock, SystemClock
from app.db.session import Database
from app.scheduling.job_statements import JOB_CLAIM
from app.scheduling.jobs import PRIORITY_QUEUE, JobSpec
from app.scheduling.models import JOB_DEAD, JOB_DONE, JOB_QUEUED, JOB_RUNNING, Job
from app.scheduling.queue import LEASE_EXPIRED_ERROR, DatabaseQueue
from app.settings import Settings
from tests.conftest import eventually
from tests.scheduling.conftest import Runtimes, database_worker
from tests.scheduling.helpers import (
    count_jobs,
    job_row,
    running,
    status_of,
    wait_for_status,
    worked_through,
)
from tests.scheduling.testjobs import RECORD, RECORD_SHORT_TIMEOUT, RUNS, Work, record


async def test_several_concurrent_workers_run_each_job_exactly_once(
    runtimes: Runtimes, settings: Settings
) -> None:
    """500 jobs, 4 workers each on its own connection pool (as separate processes would be). Each
    job takes 10 ms, so no single worker can drain the queue before the others get going."""
    runtime = runtimes.make("database")
    databases = [Database(settings.database) for _ in range(4)]
    queues = [DatabaseQueue(db, SystemClock()) for db in databases]
    try:
        workers = [database_worker(runtime, concurrency=10, batch_size=10) for _ in range(4)]
        for worker, queue in zip(workers, queues, strict=True):
            worker.queue = queue
        async with runtime.db.write() as uow:
            await runtime.queue.enqueue_many(
                uow, [(RECORD, Work(key=f"k{i}", seconds=0.01), f"once-{i}") for i in range(500)]
            )
        async with running(*workers):

            async def all_done() -> bool:
                return await count_jobs(runtime.db, status=JOB_DONE) == 500

            await eventually(all_done, timeout=60)
    finally:
        # Each queue keeps connections between leases (PostgreSQL): returned before the pools go.
        for queue, db in zip(queues, databases, strict=True):
            await queue.aclose()
            await db.dispose()
    assert sum(RUNS.started.values()) == 500
    assert set(RUNS.started.values()) == {1}
    assert sum(RUNS.done.values()) == 500
    assert sum(1 for w in workers if w.jobs_run) >= 2, "the workers really ran side by side"


async def test_job_of_a_dead_worker_runs_again_after_its_lease_expires(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key="orphan"), job_id="orphan")
    # A worker leases the job and dies: nothing ever completes or releases it.
    assert [j.id for j in await queue.lease("dead-worker", ["default"], 10, 60)] == ["orphan"]
    worker = database_worker(runtime, lease_seconds=60)
    async with running(worker):
        await worked_through(queue)
        assert RUNS.started["orphan"] == 0, "still leased by the dead worker"
        manual.advance(61)
        row = await wait_for_status(runtime.db, "orphan", JOB_DONE)
    assert RUNS.attempts["orphan"] == [2]
    assert row.attempts == 2
    assert RUNS.done["orphan"] == 1


async def test_lease_expiry_on_the_last_try_makes_the_job_dead(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key="crashy"), job_id="crashy")
    for attempt in range(1, RECORD.max_tries + 1):
        leased = await queue.lease(f"worker-{attempt}", ["default"], 1, 30)
        assert [j.attempts for j in leased] == [attempt]
        manual.advance(31)
        assert await queue.recover_expired() == 1
    row = await job_row(runtime.db, "crashy")
    assert row is not None
    assert (row.status, row.attempts, row.last_error) == (JOB_DEAD, 3, LEASE_EXPIRED_ERROR)
    assert row.finished_at == manual.now()
    assert [d.id for d in await queue.dead_jobs()] == ["crashy"]


async def test_a_stale_worker_cannot_overwrite_the_newer_attempt(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    """At-least-once, never doubly recorded: completions are conditional on the attempt."""
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key="slow"), job_id="slow")
    (first,) = await queue.lease("slow-worker", ["default"], 1, 30)
    manual.advance(31)
    await queue.recover_expired()
    (second,) = await queue.lease("other-worker", ["default"], 1, 30)
    await queue.complete([(first.id, first.attempts)])  # the first worker wakes up late
    assert await status_of(runtime.db, "slow") == JOB_RUNNING
    await queue.lease("other-worker", ["default"], 1, 30, finished=[(second.id, second.attempts)])
    assert await status_of(runtime.db, "slow") == JOB_DONE


async def test_heartbeat_keeps_a_long_job_from_being_handed_to_another_worker(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key="long", wait_for_release=True), job_id="long")
    worker = database_worker(runtime, lease_seconds=30)
    async with running(worker):
        await wait_for_status(runtime.db, "long", JOB_RUNNING)
        for _ in range(4):  # 80 s in all: well past the first 30 s lease
            manual.advance(20)
            target = manual.now() + timedelta(seconds=25)

            async def extended(target=target) -> bool:
                row = await job_row(runtime.db, "long")
                return bool(row and row.lease_expires_at and row.lease_expires_at >= target)

            await eventually(extended)
            assert await queue.recover_expired() == 0
        RUNS.gate("long").set()
        await wait_for_status(runtime.db, "long", JOB_DONE)
    assert RUNS.started["long"] == 1


async def test_failures_retry_with_doubling_backoff_then_the_job_is_dead_with_its_last_error(
    runtimes: Runtimes, manual: ManualClock, start
) -> None:
    runtime = runtimes.make("database", manual)
    await runtime.queue.enqueue(None, RECORD, Work(key="doomed", fail_until_attempt=99), job_id="d")
    async with running(database_worker(runtime)):
        row = await wait_for_status(runtime.db, "d", JOB_QUEUED)

        async def attempts_recorded(n: int) -> None:
            async def enough() -> bool:
                r = await job_row(runtime.db, "d")
                return bool(r and r.attempts == n and r.status != JOB_RUNNING)

            await eventually(enough)

        await attempts_recorded(1)
        retried = await job_row(runtime.db, "d")
        assert retried is not None
        assert retried.run_at == start + timedelta(seconds=10)
        assert retried.last_error == "RuntimeError: boom at attempt 1"
        manual.advance(9)
        await worked_through(runtime.queue)
        assert RUNS.started["doomed"] == 1, "not retried before its backoff"
        manual.advance(1)
        await attempts_recorded(2)
        doubled = await job_row(runtime.db, "d")
        assert doubled is not None
        assert doubled.run_at == manual.now() + timedelta(seconds=20), "the delay doubles"
        manual.advance(20)
        row = await wait_for_status(runtime.db, "d", JOB_DEAD)
    assert RUNS.attempts["doomed"] == [1, 2, 3]
    assert row.last_error == "RuntimeError: boom at attempt 3"
    assert row.finished_at == manual.now()
    dead = await runtime.queue.dead_jobs()
    assert [(d.id, d.attempts, d.last_error) for d in dead] == [
        ("d", 3, "RuntimeError: boom at attempt 3")
    ]


async def test_a_retry_that_succeeds_is_done(runtimes: Runtimes, manual: ManualClock) -> None:
    runtime = runtimes.make("database", manual)
    await runtime.queue.enqueue(None, RECORD, Work(key="flaky", fail_until_attempt=1), job_id="f")
    async with running(database_worker(runtime)):
        await eventually(lambda: _true(RUNS.started["flaky"] == 1))
        manual.advance(10)
        row = await wait_for_status(runtime.db, "f", JOB_DONE)
    assert (row.attempts, RUNS.done["flaky"]) == (2, 1)


async def test_a_job_over_its_timeout_is_a_failed_attempt(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    await runtime.queue.enqueue(
        None, RECORD_SHORT_TIMEOUT, Work(key="stuck", seconds=30), job_id="t"
    )
    async with running(database_worker(runtime)):
        await eventually(lambda: _true(RUNS.started["stuck"] == 1))

        async def failed_once() -> bool:
            r = await job_row(runtime.db, "t")
            return bool(r and r.status == JOB_QUEUED and r.attempts == 1)

        await eventually(failed_once)
    row = await job_row(runtime.db, "t")
    assert row is not None
    assert row.last_error == "timed out after 0.2 s"


async def test_a_job_no_process_knows_is_dead_at_once(runtimes: Runtimes) -> None:
    runtime = runtimes.make("database")
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    ghost = JobSpec("retired.job", Work, record, max_tries=5)
    async with runtime.db.write() as uow:
        await queue.enqueue_many(uow, [(ghost, Work(key="ghost"), "ghost")])
    async with running(database_worker(runtime)):
        row = await wait_for_status(runtime.db, "ghost", JOB_DEAD)
    assert row.attempts == 1
    assert row.last_error == "no job named 'retired.job' is registered"


async def test_same_job_id_is_kept_once_even_after_it_finished_until_purged(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    for _ in range(2):
        await queue.enqueue(None, RECORD, Work(key="dup"), job_id="dup:1")
    assert await count_jobs(runtime.db) == 1
    async with running(database_worker(runtime)):
        await wait_for_status(runtime.db, "dup:1", JOB_DONE)
        await queue.enqueue(None, RECORD, Work(key="dup"), job_id="dup:1")
        marker = await worked_through(queue)
        assert RUNS.started["dup"] == 1, "a finished job's id still deduplicates"
        await wait_for_status(runtime.db, marker, JOB_DONE)
        manual.advance(hours=25)
        # The finished job and the marker job.
        assert await queue.purge_finished(manual.now() - timedelta(hours=24)) == 2
        await queue.enqueue(None, RECORD, Work(key="dup"), job_id="dup:1")
        await eventually(lambda: _true(RUNS.done["dup"] == 2))


async def test_priority_queue_is_leased_first_and_lower_priority_values_first(
    runtimes: Runtimes,
) -> None:
    runtime = runtimes.make("database")
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    urgent = JobSpec("test.urgent", Work, record, queue=PRIORITY_QUEUE)
    await queue.enqueue(None, RECORD, Work(key="a"), job_id="late", priority=5)
    await queue.enqueue(None, RECORD, Work(key="b"), job_id="soon", priority=1)
    await queue.enqueue(None, urgent, Work(key="c"), job_id="urgent", priority=3)
    await queue.enqueue(None, RECORD, Work(key="d"), job_id="eager", priority=-5)
    # One lease over both queues: the priority queue's job first, whatever the others' priority.
    both = ["default", PRIORITY_QUEUE]
    assert [j.id for j in await queue.lease("w", both, 1, 30)] == ["urgent"]
    assert [j.id for j in await queue.lease("w", both, 1, 30)] == ["eager"]
    assert [j.id for j in await queue.lease("w", both, 1, 30)] == ["soon"]
    assert [j.id for j in await queue.lease("w", both, 5, 30)] == ["late"]


async def test_jobs_due_later_wait_for_their_time(runtimes: Runtimes, manual: ManualClock) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(
        None, RECORD, Work(key="later"), job_id="later", run_at=manual.now() + timedelta(minutes=5)
    )
    assert await queue.lease("w", ["default"], 5, 30) == []
    manual.advance(minutes=5)
    assert [j.id for j in await queue.lease("w", ["default"], 5, 30)] == ["later"]


async def _true(value: bool) -> bool:
    return value


async def test_buffered_jobs_wait_leased_and_are_released_uncounted_on_stop(
    runtimes: Runtimes,
) -> None:
    """One slot, a buffer of four: the worker leases five jobs, runs one, keeps four leased in
    memory, and on stop gives those four back without counting an attempt."""
    runtime = runtimes.make("database")
    async with runtime.db.write() as uow:
        await runtime.queue.enqueue_many(
            uow, [(RECORD, Work(key=f"b{i}", wait_for_release=True), f"b{i}") for i in range(5)]
        )
    worker = database_worker(runtime, concurrency=1, batch_size=10, prefetch=4)
    async with running(worker):
        await eventually(lambda: _true(sum(RUNS.started.values()) == 1))
        assert (worker.inflight, worker.buffered) == (1, 4)
        assert await count_jobs(runtime.db, status=JOB_RUNNING) == 5
        (first,) = RUNS.started
        RUNS.gate(first).set()
        # The freed slot takes the next buffered job at once; nothing more is leased.
        await eventually(lambda: _true(sum(RUNS.started.values()) == 2))
        assert worker.buffered == 3
        await wait_for_status(runtime.db, first, JOB_DONE)
    assert await count_jobs(runtime.db, status=JOB_DONE) == 1
    assert await count_jobs(runtime.db, status=JOB_QUEUED) == 4
    for i in range(5):
        row = await job_row(runtime.db, f"b{i}")
        assert row is not None
        assert row.attempts == (1 if row.status == JOB_DONE else 0)


async def test_failed_attempts_of_many_jobs_are_written_together_each_with_its_own_outcome(
    runtimes: Runtimes, manual: ManualClock, start
) -> None:
    """Twenty jobs fail at once: each goes back with its own attempt count, error and retry
    time, the ones on their last try are dead; the finished ones beside them are done."""
    runtime = runtimes.make("database", manual)
    items = [(RECORD, Work(key=f"f{i}", fail_until_attempt=99), f"f{i}") for i in range(20)]
    items += [(RECORD, Work(key=f"ok{i}"), f"ok{i}") for i in range(20)]
    async with runtime.db.write() as uow:
        await runtime.queue.enqueue_many(uow, items)
    async with running(database_worker(runtime, concurrency=40, batch_size=40)):

        async def settled(attempts: int, status: str) -> bool:
            async with runtime.db.read() as session:
                rows = [await session.get(Job, f"f{i}") for i in range(20)]
            return all(r and r.attempts == attempts and r.status == status for r in rows)

        await eventually(lambda: settled(1, JOB_QUEUED))
        for i in range(20):
            row = await job_row(runtime.db, f"f{i}")
            assert row is not None
            assert row.run_at == start + timedelta(seconds=10)
            assert row.last_error == "RuntimeError: boom at attempt 1"
            assert row.leased_by is None
            assert row.lease_expires_at is None
        await eventually(lambda: _true(sum(RUNS.done.values()) == 20))
        manual.advance(10)
        await eventually(lambda: settled(2, JOB_QUEUED))
        manual.advance(20)
        await eventually(lambda: settled(3, JOB_DEAD))
    assert await count_jobs(runtime.db, status=JOB_DONE) == 20
    assert all(RUNS.attempts[f"f{i}"] == [1, 2, 3] for i in range(20))
    assert all(RUNS.started[f"ok{i}"] == 1 for i in range(20))


async def test_a_completion_no_lease_carries_is_written_on_the_flush_timer(
    runtimes: Runtimes,
) -> None:
    """Four slots, three taken by jobs that wait: the one freed slot is too little room for
    another lease (and the poll interval is long), yet the finished job is recorded done soon."""
    runtime = runtimes.make("database")
    async with runtime.db.write() as uow:
        items = [(RECORD, Work(key=f"s{i}", wait_for_release=True), f"s{i}") for i in range(3)]
        await runtime.queue.enqueue_many(uow, [*items, (RECORD, Work(key="quick"), "quick")])
    worker = database_worker(runtime, concurrency=4, batch_size=4, prefetch=0, poll_interval=30)
    async with running(worker):
        await wait_for_status(runtime.db, "quick", JOB_DONE)
        assert worker.inflight == 3
        for i in range(3):
            assert await status_of(runtime.db, f"s{i}") == JOB_RUNNING
            RUNS.gate(f"s{i}").set()
    assert await count_jobs(runtime.db, status=JOB_DONE) == 4, "the rest written on stop"


async def test_the_lease_is_the_shared_claim_and_stamps_owner_expiry_and_attempt(
    runtimes: Runtimes, manual: ManualClock, start
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key="c"), job_id="c")
    (job,) = await queue.lease("w1", ["default"], 10, 30)
    assert (job.id, job.attempts, job.max_tries) == ("c", 1, 3)
    row = await job_row(runtime.db, "c")
    assert row is not None
    assert (row.status, row.leased_by, row.lease_expires_at) == (
        JOB_RUNNING,
        "w1",
        start + timedelta(seconds=30),
    )
    # The claim's heartbeat keeps the job for its owner only, while it runs.
    assert (
        await JOB_CLAIM.renew(runtime.db, ["c"], owner="w2", now=start, lease_seconds=60) == set()
    )
    assert await JOB_CLAIM.renew(runtime.db, ["c"], owner="w1", now=start, lease_seconds=60) == {
        "c"
    }
    await queue.lease("w1", ["default"], 10, 30, finished=[(job.id, job.attempts)])
    assert await status_of(runtime.db, "c") == JOB_DONE
    assert (
        await JOB_CLAIM.renew(runtime.db, ["c"], owner="w1", now=start, lease_seconds=60) == set()
    )
