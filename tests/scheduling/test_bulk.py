"""The bulk-job runner's chunk sizing: chunks adapt to take about BULK_CHUNK_SECONDS, so a slow
or busy machine holds the write lock no longer than a fast one, and the time a chunk waits for
the database is not counted as its own."""

from __future__ import annotations

import asyncio
import dataclasses

from sqlalchemy import select

from app.db.session import WriteSession
from app.runtime import Runtime
from app.scheduling.bulk import (
    MIN_CHUNK_ITEMS,
    BulkKind,
    Chunk,
    StepInput,
    bulk_job_spec,
    get_bulk_job,
    next_chunk_size,
    run_bulk_job,
    submit,
)
from app.scheduling.bulk_models import BulkJob
from app.settings import BulkSettings
from tests.factories import create_tenant


def test_a_slow_chunk_makes_the_next_one_smaller_and_a_fast_one_larger() -> None:
    assert next_chunk_size(200, 0.8, target=0.2, most=200) == 50
    assert next_chunk_size(50, 0.05, target=0.2, most=200) == 100  # at most double
    assert next_chunk_size(100, 0.0, target=0.2, most=200) == 200
    assert next_chunk_size(200, 0.01, target=0.2, most=200) == 200  # never above the setting
    assert next_chunk_size(20, 30.0, target=0.2, most=200) == MIN_CHUNK_ITEMS
    assert next_chunk_size(5, 30.0, target=0.2, most=5) == 5


async def test_a_chunk_that_waited_for_the_database_is_not_made_smaller(
    real_time_runtime: Runtime,
) -> None:
    """Waiting in line behind another writer is not the chunk's cost: counted as such, a busy
    database made the chunks smaller and the pauses between them longer (an import beside a
    busy API slowed to a crawl). The size follows the time the chunk itself held the lock."""
    rt = real_time_runtime
    rt.settings = dataclasses.replace(
        rt.settings, bulk=BulkSettings(chunk_items=200, chunk_seconds=0.2)
    )
    tenant = await create_tenant(rt, name="Bulk")
    limits: list[int] = []

    async def step(session: WriteSession, inp: StepInput) -> Chunk:
        limits.append(inp.limit)
        done = int(inp.job.cursor.get("done", 0)) + inp.limit
        return Chunk(cursor={"done": done}, processed=inp.limit, finished=done >= 600)

    kind = BulkKind("tests.waiting", step)
    spec = bulk_job_spec(kind)
    async with rt.db.write() as uow:
        job = await submit(
            uow, rt.queue, spec, workspace_id=tenant.workspace_id, kind=kind, now=rt.clock.now()
        )
    holding = asyncio.Event()

    async def hold_the_job_row() -> None:
        async with rt.db.write() as uow:
            await uow.session.scalar(select(BulkJob).where(BulkJob.id == job.id).with_for_update())
            holding.set()
            await asyncio.sleep(0.6)  # longer than BULK_CHUNK_SECONDS, and then some

    holder = asyncio.create_task(hold_the_job_row())
    await holding.wait()
    await run_bulk_job(rt.context(), kind, job.id, spec)
    await holder

    assert limits == [200, 200, 200]
    async with rt.db.read() as session:
        stored = await get_bulk_job(session, tenant.workspace_id, job.id)
    assert (stored.status, stored.processed) == ("done", 600)
