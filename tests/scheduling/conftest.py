"""Fixtures for the queue, worker and sweeper tests.

These build their own runtimes with only the test jobs registered, on the session's database, and
choose the queue backend explicitly: the database queue always (SQLite or PostgreSQL, whichever the
session uses), arq in addition when ``TEST_REDIS_URL`` is set.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import delete

from app.clock import Clock, ManualClock, SystemClock
from app.db.session import Database
from app.runtime import Runtime, build_runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.arq_workers import ArqWorkers
from app.scheduling.models import Job, SweeperState
from app.scheduling.queue import DatabaseQueue
from app.scheduling.worker import DatabaseWorker
from app.settings import Settings
from tests.conftest import TEST_REDIS_URL
from tests.scheduling import testjobs

BACKENDS = [
    "database",
    pytest.param(
        "arq",
        marks=pytest.mark.skipif(not TEST_REDIS_URL, reason="needs TEST_REDIS_URL"),
    ),
]


def database_queue_settings(settings: Settings) -> Settings:
    """The session's settings with the database queue, whatever ``TEST_REDIS_URL`` says."""
    return dataclasses.replace(settings, queue=dataclasses.replace(settings.queue, redis_url=""))


def arq_settings(settings: Settings) -> Settings:
    """The session's settings on arq, with a queue name of this test's own."""
    queue = dataclasses.replace(
        settings.queue,
        redis_url=TEST_REDIS_URL,
        arq_queue_name=f"sweepline-test-{uuid.uuid4().hex[:10]}",
    )
    return dataclasses.replace(settings, queue=queue)


@pytest.fixture(autouse=True)
async def _clean(shared_db: Database) -> AsyncIterator[None]:
    testjobs.RUNS.reset()
    yield
    testjobs.RUNS.reset()
    # These tests write only the queue's and the sweepers' tables; emptying just those is much
    # cheaper on PostgreSQL than truncating every table.
    async with shared_db.write() as uow:
        await uow.session.execute(delete(Job))
        await uow.session.execute(delete(SweeperState))


@pytest.fixture
def start() -> datetime:
    return datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def manual(start: datetime) -> ManualClock:
    return ManualClock(start)


class Runtimes:
    """Builds test runtimes and closes them (and their Redis keys) at the end of the test."""

    def __init__(self, settings: Settings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.built: list[Runtime] = []

    def make(self, backend: str, clock: Clock | None = None, **queue: Any) -> Runtime:
        base = (
            arq_settings(self.settings)
            if backend == "arq"
            else database_queue_settings(self.settings)
        )
        if queue:
            base = dataclasses.replace(base, queue=dataclasses.replace(base.queue, **queue))
        runtime = build_runtime(base, clock or SystemClock(), db=self.db)
        runtime.add_jobs(testjobs.ALL)
        self.built.append(runtime)
        return runtime

    async def close(self) -> None:
        for runtime in self.built:
            await runtime.stop()
            await runtime.resources.aclose()
            if isinstance(runtime.queue, ArqQueue):
                await _delete_keys(runtime.queue)
            await runtime.queue.aclose()


async def _delete_keys(queue: ArqQueue) -> None:
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        keys = [k async for k in client.scan_iter(f"{queue.base_name}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
async def runtimes(settings: Settings, shared_db: Database) -> AsyncIterator[Runtimes]:
    made = Runtimes(settings, shared_db)
    yield made
    await made.close()


def database_worker(runtime: Runtime, **overrides: Any) -> DatabaseWorker:
    """A database-queue worker on ``runtime`` with small, test-friendly defaults."""
    assert isinstance(runtime.queue, DatabaseQueue)
    options: dict[str, Any] = {
        "concurrency": 8,
        "batch_size": 8,
        "prefetch": 8,
        "lease_seconds": 60,
        "poll_interval": 0.02,
        "shutdown_grace": 1.0,
    }
    options.update(overrides)
    return DatabaseWorker(runtime.queue, runtime.registry, runtime.context, **options)


def arq_workers(runtime: Runtime, **overrides: Any) -> ArqWorkers:
    assert isinstance(runtime.queue, ArqQueue)
    options: dict[str, Any] = {"concurrency": 8, "shutdown_grace": 1.0, "poll_delay": 0.02}
    options.update(overrides)
    return ArqWorkers(runtime.queue, runtime.registry, runtime.context, **options)


Predicate = Callable[[], Any]
