"""Dead-job operations on both queue backends (PL-5): a job that fails goes dead after its tries
with every attempt in its history; a retried dead job runs again under the same id and succeeds;
a requeued one waits for its time; a discarded one is kept and never runs again. The database
queue always, arq on Redis when ``TEST_REDIS_URL`` is set."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete, select

from app.clock import ManualClock
from app.db.session import Database
from app.runtime import Runtime
from app.scheduling import dead_jobs
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.attempts import purge_attempts
from app.scheduling.dead_jobs import JobNotDead
from app.scheduling.job_owners import Viewer, settle_owners
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy
from app.scheduling.models import JOB_DEAD, JOB_DISCARDED, JOB_DONE, JOB_QUEUED, JobAttempt
from app.scheduling.queue import DatabaseQueue, failed_attempt
from tests.scheduling.conftest import BACKENDS, Runtimes, arq_workers, database_worker
from tests.scheduling.helpers import job_row, running, wait_for_status, worked_through
from tests.scheduling.testjobs import RUNS

OPERATOR = Viewer(workspace_id=0, operator=True)
FAILING: set[str] = set()
"""Keys of :data:`FLAKY` jobs that fail while listed."""


class Flaky(JobPayload, frozen=True):
    key: str
    workspace_id: int = 7


async def flaky(ctx: JobContext, work: Flaky) -> None:
    RUNS.started[work.key] += 1
    RUNS.attempts.setdefault(work.key, []).append(ctx.attempt)
    if work.key in FAILING:
        raise RuntimeError(f"boom at attempt {ctx.attempt}")
    RUNS.done[work.key] += 1


FLAKY = JobSpec(
    "test.flaky",
    Flaky,
    flaky,
    max_tries=2,
    backoff_seconds=0.05,
    owner=OwnedBy("workspace_id"),
)


@pytest.fixture(autouse=True)
async def _forget(shared_db: Database) -> Any:
    FAILING.clear()
    yield
    FAILING.clear()
    async with shared_db.write() as uow:
        await uow.session.execute(delete(JobAttempt))


def _runtime(runtimes: Runtimes, backend: str) -> Runtime:
    runtime = runtimes.make(backend)
    runtime.add_jobs([FLAKY])
    return runtime


def _workers(runtime: Runtime) -> Any:
    if isinstance(runtime.queue, ArqQueue):
        return arq_workers(runtime)
    return database_worker(runtime)


def _key(backend: str, name: str) -> str:
    # arq keeps job keys in one Redis namespace: ids must not collide with other test runs.
    return f"{name}:{id(RUNS):x}:{backend}"


async def _dead_job(runtime: Runtime, key: str) -> None:
    FAILING.add(key)
    await runtime.queue.enqueue(None, FLAKY, Flaky(key=key), job_id=key)
    async with running(_workers(runtime)):
        await wait_for_status(runtime.db, key, JOB_DEAD)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_failing_job_goes_dead_after_its_tries_with_each_attempt_in_its_history(
    backend: str, runtimes: Runtimes
) -> None:
    """PL-5: every attempt of a job that died is in its history: when, where, outcome, error."""
    runtime = _runtime(runtimes, backend)
    key = _key(backend, "dies")
    await _dead_job(runtime, key)
    async with runtime.db.read() as session:
        job, history = await dead_jobs.read_job(session, OPERATOR, key)
    assert job.attempts == 2
    assert [(e.attempt, e.outcome) for e in history] == [(1, "failed"), (2, "dead")]
    assert [e.error for e in history] == [
        "RuntimeError: boom at attempt 1",
        "RuntimeError: boom at attempt 2",
    ]
    assert all(e.worker and e.at is not None for e in history)
    assert RUNS.attempts[key] == [1, 2]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_retried_dead_job_runs_again_under_its_id_and_succeeds(
    backend: str, runtimes: Runtimes
) -> None:
    """PL-5: retry runs a dead job again now, its tries counted afresh, under the same id (its
    idempotency key); the history keeps the dead attempts, the retry and who asked, and the
    success."""
    runtime = _runtime(runtimes, backend)
    key = _key(backend, "retried")
    await _dead_job(runtime, key)
    FAILING.discard(key)
    async with runtime.db.write() as uow:
        revived = await dead_jobs.revive(
            uow,
            runtime.queue,
            runtime.registry,
            OPERATOR,
            key,
            actor="user:1",
            now=runtime.clock.now(),
        )
        assert (revived.status, revived.attempts) == (JOB_QUEUED, 0)
    async with running(_workers(runtime)):
        done = await wait_for_status(runtime.db, key, JOB_DONE)
    assert done.id == key
    assert done.attempts == 1
    assert RUNS.attempts[key] == [1, 2, 1]
    assert RUNS.done[key] == 1
    async with runtime.db.read() as session:
        _, history = await dead_jobs.read_job(session, OPERATOR, key)
    assert [(e.attempt, e.outcome) for e in history] == [
        (1, "failed"),
        (2, "dead"),
        (0, "retried"),
        (1, "done"),
    ]
    assert history[2].worker == "user:1"
    assert history[3].worker


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_requeued_dead_job_waits_for_its_time(backend: str, runtimes: Runtimes) -> None:
    """PL-5: requeue puts a dead job back in the queue at the chosen time, not before."""
    runtime = _runtime(runtimes, backend)
    key = _key(backend, "requeued")
    await _dead_job(runtime, key)
    FAILING.discard(key)
    at = runtime.clock.now() + timedelta(hours=1)
    async with runtime.db.write() as uow:
        await dead_jobs.revive(
            uow,
            runtime.queue,
            runtime.registry,
            OPERATOR,
            key,
            actor="user:1",
            now=runtime.clock.now(),
            run_at=at,
        )
    async with running(_workers(runtime)):
        await worked_through(runtime.queue)
    row = await job_row(runtime.db, key)
    assert row is not None
    assert (row.status, row.run_at, row.attempts) == (JOB_QUEUED, at, 0)
    assert RUNS.started[key] == 2  # the two attempts before it died, nothing since


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_discarded_job_is_kept_with_its_history_and_never_runs(
    backend: str, runtimes: Runtimes
) -> None:
    """PL-5: discard marks a dead job discarded; it stays, its history says who, and it can no
    longer be retried."""
    runtime = _runtime(runtimes, backend)
    key = _key(backend, "discarded")
    await _dead_job(runtime, key)
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await dead_jobs.discard(uow, OPERATOR, key, actor="api_key:9", now=now)
    with pytest.raises(JobNotDead):
        async with runtime.db.write() as uow:
            await dead_jobs.revive(
                uow, runtime.queue, runtime.registry, OPERATOR, key, actor="user:1", now=now
            )
    async with running(_workers(runtime)):
        await worked_through(runtime.queue)
    async with runtime.db.read() as session:
        job, history = await dead_jobs.read_job(session, OPERATOR, key)
        listed = await dead_jobs.list_jobs(session, OPERATOR, status=JOB_DISCARDED)
    assert job.status == JOB_DISCARDED
    assert [e.outcome for e in history] == ["failed", "dead", "discarded"]
    assert history[-1].worker == "api_key:9"
    assert key in [j.id for j in listed]
    assert RUNS.started[key] == 2


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_dead_job_belongs_to_its_workspace_and_is_not_found_from_another(
    backend: str, runtimes: Runtimes
) -> None:
    """PL-1, PL-5: a dead job's owner is read from its payload; another workspace neither lists
    it nor finds it, nor can act on it."""
    runtime = _runtime(runtimes, backend)
    key = _key(backend, "owned")
    await _dead_job(runtime, key)
    assert await settle_owners(runtime.db, runtime.registry) == 1
    owner, stranger = Viewer(workspace_id=7), Viewer(workspace_id=8)
    async with runtime.db.read() as session:
        assert [j.id for j in await dead_jobs.list_jobs(session, owner)] == [key]
        assert await dead_jobs.list_jobs(session, stranger) == []
        with pytest.raises(dead_jobs.JobNotFound):
            await dead_jobs.get_job(session, stranger, key)
    with pytest.raises(dead_jobs.JobNotFound):
        async with runtime.db.write() as uow:
            await dead_jobs.discard(uow, stranger, key, actor="user:2", now=runtime.clock.now())


async def test_an_attempt_whose_worker_stopped_is_in_the_history_as_lost(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    """PL-5: a database-queue attempt whose lease expired (its worker died) is recorded with the
    worker that held it; out of tries, the job is dead with that attempt as its last."""
    runtime = runtimes.make("database", manual)
    runtime.add_jobs([FLAKY])
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, FLAKY, Flaky(key="lost"), job_id="lost")
    for holder in ("host:1:a", "host:2:b"):
        [leased] = await queue.lease(holder, ["default"], 1, 30)
        assert leased.id == "lost"
        manual.advance(31)
        assert await queue.recover_expired() == 1
    async with runtime.db.read() as session:
        job, history = await dead_jobs.read_job(session, OPERATOR, "lost")
    assert job.status == JOB_DEAD
    assert [(e.attempt, e.outcome, e.worker) for e in history] == [
        (1, "lost", "host:1:a"),
        (2, "dead", "host:2:b"),
    ]


async def test_only_one_of_two_racing_retries_revives_the_job(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    """PL-5: a retry of a job that is no longer dead (another request revived it) changes
    nothing and says so."""
    runtime = runtimes.make("database", manual)
    runtime.add_jobs([FLAKY])
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, FLAKY, Flaky(key="twice"), job_id="twice")
    [leased] = await queue.lease("w", ["default"], 1, 30)
    await queue.fail(leased, "boom", manual.now(), give_up=True)
    async with runtime.db.write() as uow:
        await dead_jobs.revive(
            uow, queue, runtime.registry, OPERATOR, "twice", actor="user:1", now=manual.now()
        )
    with pytest.raises(JobNotDead):
        async with runtime.db.write() as uow:
            await dead_jobs.revive(
                uow, queue, runtime.registry, OPERATOR, "twice", actor="user:2", now=manual.now()
            )
    async with runtime.db.read() as session:
        _, history = await dead_jobs.read_job(session, OPERATOR, "twice")
    assert [e.outcome for e in history] == ["dead", "retried"]


async def test_the_purge_forgets_the_history_of_done_jobs_and_keeps_the_dead_ones(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    """PL-5: a dead job keeps its history as long as it is kept; a job that ended done is
    forgotten with its history once past the retention."""
    runtime = runtimes.make("database", manual)
    runtime.add_jobs([FLAKY])
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    for key in ("recovers", "stays-dead"):
        await queue.enqueue(None, FLAKY, Flaky(key=key), job_id=key)
    leased = await queue.lease("w", ["default"], 2, 30)
    await queue.fail_many(
        [failed_attempt(j, "boom", manual.now(), give_up=j.id == "stays-dead") for j in leased]
    )
    [again] = await queue.lease("w", ["default"], 1, 30)
    await queue.complete([(again.id, again.attempts)])
    manual.advance(48 * 3600)
    await queue.purge_finished(manual.now() - timedelta(hours=24))
    assert await purge_attempts(runtime.db, manual.now() - timedelta(hours=24)) == 1
    async with runtime.db.read() as session:
        kept = list(await session.scalars(select(JobAttempt.job_id)))
    assert kept == ["stays-dead"]
