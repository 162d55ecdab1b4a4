"""A lease holder that is stalled, not dead, cannot block a takeover (session timeouts by kind,
app/db/session_kinds.py; PL-15 settings, the queue's at-least-once promise).

A child process leases nothing itself: it holds the row lock of a job whose lease has expired
(on SQLite, the write lock) inside an open transaction and stops with SIGSTOP. On PostgreSQL the
worker's recovery meets ``lock_timeout`` (a claim's, short) and the worker goes on with its other
jobs; once ``idle_in_transaction_session_timeout`` ends the frozen session, the expired lease is
taken over and the job runs once, the holder still frozen. On SQLite, where no server can end a
frozen holder's transaction, a claim's write gives up after its own busy timeout instead of
hanging, and the job is taken over once the holder is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from app.db.locks import is_lock_timeout
from app.db.session_kinds import CLAIM, session_kind
from app.runtime import Runtime, build_runtime
from app.scheduling.models import JOB_DONE, JOB_RUNNING
from app.scheduling.queue import DatabaseQueue
from app.settings import Settings
from tests.conftest import eventually, is_postgres
from tests.scheduling.conftest import database_queue_settings, database_worker
from tests.scheduling.helpers import job_row, running, wait_for_status, worked_through
from tests.scheduling.testjobs import RECORD, RUNS, Work

ROOT = Path(__file__).resolve().parents[2]


class Holder:
    """``python -m tests.scheduling.lock_holder_proc``: locks a job's row, then SIGSTOPs."""

    def __init__(self, settings: Settings, job_id: str, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.scheduling.lock_holder_proc", job_id],
            cwd=ROOT,
            env={
                **os.environ,
                "DATABASE_URL": settings.database.url,
                "ENCRYPTION_KEY": settings.security.encryption_key,
                "SESSION_SECRET": settings.web.session_secret,
                "KEY_FILE": settings.security.key_file,
                "REDIS_URL": "",
                **env,
            },
            stdout=subprocess.PIPE,
        )

    async def frozen(self) -> None:
        assert self.proc.stdout is not None
        line = await asyncio.to_thread(self.proc.stdout.readline)
        assert line.strip() == b"locked"
        await eventually(lambda: _async(self.state() == "T"))

    def state(self) -> str:
        """The process's state letter (``T``: stopped)."""
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


async def _async(value: bool) -> bool:
    return value


@pytest.fixture
async def holders() -> AsyncIterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for holder in made:
        holder.kill()


@pytest.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """A runtime on its own connections, whose claims wait 200 ms for a lock."""
    base = database_queue_settings(settings)
    database = dataclasses.replace(
        base.database, claim_lock_timeout_ms=200, claim_busy_timeout_ms=200
    )
    made = build_runtime(dataclasses.replace(base, database=database))
    made.add_jobs([RECORD])
    yield made
    await made.queue.aclose()
    await made.db.dispose()


async def _expired_job(runtime: Runtime, key: str) -> str:
    """A job leased by a worker that is gone: running, its lease already expired."""
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key=key), job_id=key)
    leased = await queue.lease("stalled-holder", ["default"], 1, 0.0)
    assert [j.id for j in leased] == [key]
    return key


async def _claim_meets_lock_timeout(queue: DatabaseQueue) -> None:
    with session_kind(CLAIM), pytest.raises(DBAPIError) as raised:
        await queue.recover_expired()
    assert is_lock_timeout(raised.value)


@pytest.mark.postgres
@pytest.mark.slow
async def test_a_claim_waiting_on_a_frozen_holder_times_out_and_the_worker_goes_on(
    runtime: Runtime, holders: list[Holder]
) -> None:
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    key = await _expired_job(runtime, "frozen-a")
    holder = Holder(runtime.settings, key, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS="0")
    holders.append(holder)
    await holder.frozen()
    await _claim_meets_lock_timeout(queue)
    async with running(database_worker(runtime, lease_seconds=2)):
        # Its recovery round meets the same lock and times out; its other jobs still run.
        await worked_through(queue)
    row = await job_row(runtime.db, key)
    assert row is not None
    assert (row.status, row.leased_by) == (JOB_RUNNING, "stalled-holder")
    assert holder.state() == "T"


@pytest.mark.postgres
@pytest.mark.slow
async def test_an_expired_lease_of_a_frozen_holder_is_taken_once_its_idle_session_ends(
    runtime: Runtime, holders: list[Holder]
) -> None:
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    key = await _expired_job(runtime, "frozen-b")
    holder = Holder(runtime.settings, key, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS="500")
    holders.append(holder)
    await holder.frozen()
    async with running(database_worker(runtime, lease_seconds=2)):
        row = await wait_for_status(runtime.db, key, JOB_DONE, timeout=60)
        await worked_through(queue)
    assert (RUNS.started[key], RUNS.done[key]) == (1, 1)
    assert row.attempts == 2, "the expired attempt, then this worker's"
    assert holder.state() == "T", "taken over while the holder is still frozen"


@pytest.mark.slow
@pytest.mark.skipif(is_postgres(), reason="the SQLite equivalent")
async def test_sqlite_a_claim_gives_up_on_a_frozen_writer_and_the_job_is_taken_once_it_is_gone(
    runtime: Runtime, holders: list[Holder]
) -> None:
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    key = await _expired_job(runtime, "frozen-c")
    holder = Holder(runtime.settings, key)
    holders.append(holder)
    await holder.frozen()
    await _claim_meets_lock_timeout(queue)
    # SQLite has no server to end the frozen transaction: the write lock is the holder's until
    # it is gone.
    holder.kill()
    async with running(database_worker(runtime, lease_seconds=2)):
        row = await wait_for_status(runtime.db, key, JOB_DONE, timeout=60)
        await worked_through(queue)
    assert (RUNS.started[key], RUNS.done[key]) == (1, 1)
    assert row.attempts == 2
