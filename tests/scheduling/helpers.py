"""Small helpers shared by the scheduling tests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import func, select

from app.db.session import Database
from app.scheduling.models import Job
from app.scheduling.queue import JobQueue
from tests.conftest import eventually
from tests.scheduling.testjobs import RECORD, RUNS, Work

_MARKERS = itertools.count(1)


async def job_row(db: Database, job_id: str) -> Job | None:
    async with db.read() as session:
        return await session.get(Job, job_id)


async def count_jobs(db: Database, **where: Any) -> int:
    stmt = select(func.count()).select_from(Job)
    for column, value in where.items():
        stmt = stmt.where(getattr(Job, column) == value)
    async with db.read() as session:
        return int((await session.execute(stmt)).scalar_one())


async def status_of(db: Database, job_id: str) -> str | None:
    row = await job_row(db, job_id)
    return None if row is None else row.status


async def wait_for_status(db: Database, job_id: str, status: str, timeout: float = 10.0) -> Job:
    async def reached() -> bool:
        return await status_of(db, job_id) == status

    await eventually(reached, timeout=timeout)
    row = await job_row(db, job_id)
    assert row is not None
    return row


@contextlib.asynccontextmanager
async def running(*workers: Any) -> AsyncIterator[list[asyncio.Task[None]]]:
    """Run workers (anything with ``run()`` and ``stop()``/``shutdown()``) for the block."""
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        yield tasks
    finally:
        for worker in workers:
            if hasattr(worker, "shutdown"):
                await worker.shutdown()
            else:
                worker.stop()
        await asyncio.gather(*tasks, return_exceptions=True)


async def worked_through(queue: JobQueue) -> str:
    """Enqueue a marker job behind everything that is due and wait until a worker has run it.

    Queues hand out due jobs oldest first, so by then every job that was due before the marker has
    been leased and started: a test that checks a job did *not* run (a duplicate, one whose lease
    or backoff has not run out) waits for this instead of for some amount of time. Returns the
    marker's job id."""
    key = f"marker-{next(_MARKERS)}-{uuid.uuid4().hex[:8]}"
    await queue.enqueue(None, RECORD, Work(key=key), job_id=key)

    async def ran() -> bool:
        return RUNS.done[key] == 1

    await eventually(ran)
    return key


async def commands_seen(client: Redis, seconds: float) -> list[str]:
    """Every command the Redis server received during ``seconds`` (MONITOR), as sent."""
    seen: list[str] = []
    async with client.monitor() as monitor:

        async def listen() -> None:
            while True:
                seen.append(str((await monitor.next_command())["command"]))

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(listen(), seconds)
    return seen
