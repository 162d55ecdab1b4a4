"""Small helpers shared by the scheduling tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import func, select

from app.db.session import Database
from app.scheduling.models import Job
from tests.conftest import eventually


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
