"""Supervision of the database-queue worker loops (issue 11 item 3): a loop that meets a database
error logs it with its traceback and goes on; a loop that stops coming round makes ``/ready``
answer 503 naming it, and ``/ready`` recovers once the loop moves again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text

from app.clock import ManualClock
from app.db.dialect import is_postgres
from app.db.session import Database
from app.runtime import Runtime
from app.scheduling.models import JOB_DONE
from app.scheduling.worker import STALL_SECONDS, DatabaseWorker
from tests.conftest import eventually
from tests.harness.app_client import asgi_transport
from tests.scheduling.conftest import Runtimes
from tests.scheduling.helpers import count_jobs
from tests.scheduling.testjobs import RECORD, RUNS, Work


@pytest.fixture
async def ready_client(runtime_db: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    from app.web.app import create_app

    app = create_app(runtime_db.settings, runtime_db, background=False)
    transport = asgi_transport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@pytest.fixture
def runtime_db(runtimes: Runtimes, manual: ManualClock) -> Runtime:
    return runtimes.make("database", manual)


@pytest.fixture
async def failing_lease(shared_db: Database) -> AsyncIterator[None]:
    """A database trigger that makes every lease (an UPDATE of ``jobs``) fail: a real error from
    the database, as a lock episode or a full disk would raise."""
    await install_lease_trigger(shared_db)
    yield
    await drop_lease_trigger(shared_db)


async def install_lease_trigger(shared_db: Database) -> None:
    """Make every UPDATE of ``jobs`` fail from now on (see :func:`drop_lease_trigger`)."""
    async with shared_db.write() as uow:
        if is_postgres(shared_db):
            await uow.session.execute(
                text(
                    "CREATE FUNCTION jobs_lease_fails() RETURNS trigger AS $$ BEGIN "
                    "RAISE EXCEPTION 'injected: disk I/O error'; END $$ LANGUAGE plpgsql"
                )
            )
            await uow.session.execute(
                text(
                    "CREATE TRIGGER jobs_lease_fails BEFORE UPDATE ON jobs "
                    "FOR EACH ROW EXECUTE FUNCTION jobs_lease_fails()"
                )
            )
        else:
            await uow.session.execute(
                text(
                    "CREATE TRIGGER jobs_lease_fails BEFORE UPDATE ON jobs "
                    "BEGIN SELECT RAISE(ABORT, 'injected: disk I/O error'); END"
                )
            )


async def drop_lease_trigger(db: Database) -> None:
    async with db.write() as uow:
        if is_postgres(db):
            await uow.session.execute(text("DROP TRIGGER IF EXISTS jobs_lease_fails ON jobs"))
            await uow.session.execute(text("DROP FUNCTION IF EXISTS jobs_lease_fails()"))
        else:
            await uow.session.execute(text("DROP TRIGGER IF EXISTS jobs_lease_fails"))


def _workers(runtime: Runtime) -> list[DatabaseWorker]:
    return [w for w in runtime._workers if isinstance(w, DatabaseWorker)]


async def test_a_database_error_in_a_worker_loop_is_logged_and_the_loop_goes_on(
    runtime_db: Runtime,
    manual: ManualClock,
    failing_lease: None,
    ready_client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = runtime_db
    await runtime.queue.enqueue(None, RECORD, Work(key="after-the-storm"), job_id="storm")
    before = REGISTRY.get_sample_value("sweepline_worker_loop_errors_total") or 0
    with caplog.at_level(logging.ERROR, logger="app.scheduling.worker"):
        runtime.start_workers()
        workers = _workers(runtime)
        assert workers

        def injected() -> list[logging.LogRecord]:
            return [
                r
                for r in caplog.records
                if r.exc_info is not None and "injected: disk I/O error" in str(r.exc_info[1])
            ]

        async def failed_again_and_again() -> bool:
            return len(injected()) >= 2 * len(workers)

        await eventually(failed_again_and_again)
    assert injected(), "each failure is logged with its traceback"
    counted = REGISTRY.get_sample_value("sweepline_worker_loop_errors_total") or 0
    assert counted - before >= 2 * len(workers), "and counted"
    assert RUNS.started["after-the-storm"] == 0
    assert (await ready_client.get("/ready")).status_code == 200, "a loop that goes on is ready"
    await drop_lease_trigger(runtime.db)  # the database recovers

    async def done() -> bool:
        return await count_jobs(runtime.db, status=JOB_DONE) == 1

    await eventually(done)
    assert all(not t.done() for t in runtime._worker_tasks.values()), "every loop survived"
    assert RUNS.done["after-the-storm"] == 1


@pytest.mark.postgres
async def test_a_worker_loop_that_stops_coming_round_makes_ready_answer_503_naming_it(
    runtime_db: Runtime, manual: ManualClock, ready_client: httpx.AsyncClient, shared_db: Database
) -> None:
    """Every loop is stuck on its lease statement (another transaction holds the jobs table
    against writes); reads and the readiness probe still answer."""
    runtime = runtime_db
    runtime.start_workers()
    workers = _workers(runtime)
    assert (await ready_client.get("/ready")).status_code == 200
    async with shared_db.write() as uow:
        await uow.session.execute(text("LOCK TABLE jobs IN EXCLUSIVE MODE"))
        # Wait until every loop sits in a lease that cannot proceed.
        await eventually(lambda: _blocked_on_lock(shared_db, len(workers)))
        manual.advance(STALL_SECONDS + 1)
        r = await ready_client.get("/ready")
        assert r.status_code == 503
        assert r.json()["status"] == "unavailable"
        assert sorted(r.json()["stale"]) == sorted(f"worker:{w.worker_id}" for w in workers)
    # The lock is gone: the loops come round and the process is ready again.

    async def ready_again() -> bool:
        return (await ready_client.get("/ready")).status_code == 200

    await eventually(ready_again)


async def _blocked_on_lock(db: Database, n: int) -> bool:
    async with db.read() as session:
        waiting = await session.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' "
                "AND query ILIKE '%UPDATE jobs%'"
            )
        )
    await asyncio.sleep(0)
    return int(waiting or 0) >= n
