"""A batch record moves only as its machine declares (``adrules_batches.status``): it starts only
from ``queued`` and closes only from ``running``, so an account job run again on a closed batch
(its first run finished, then the job was delivered twice) leaves the record as it was."""

from __future__ import annotations

from typing import Any

from app.engines.adrules.batch_states import BATCH_COMPLETED, BATCH_RUNNING
from app.engines.adrules.models import Batch
from app.engines.adrules.records import Counts, finish_batch, start_batch
from app.engines.adrules.schemas import LogOnly, TaskIn
from app.runtime import Runtime
from tests.engines.adrules.factories import create_batch, create_setup


async def _batch(runtime: Runtime, record_id: int) -> Batch:
    async with runtime.db.read() as session:
        batch = await session.get(Batch, record_id)
    assert batch is not None
    return batch


async def test_a_closed_batch_is_not_started_or_closed_again(runtime: Runtime, ws: Any) -> None:
    setup = await create_setup(
        runtime, int(ws.workspace_id), tasks=[TaskIn(name="Log", conditions=[], action=LogOnly())]
    )
    _, record_id = await create_batch(runtime, setup, entities=2)
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await start_batch(uow.session, record_id, now, "UTC")
    assert (await _batch(runtime, record_id)).status == BATCH_RUNNING
    async with runtime.db.write() as uow:
        status = await finish_batch(uow.session, record_id, Counts(executed=2), now)
    assert status == BATCH_COMPLETED

    # The same job delivered again: its start and its close find nothing to move.
    async with runtime.db.write() as uow:
        await start_batch(uow.session, record_id, now, "UTC")
        await finish_batch(uow.session, record_id, Counts(errors=2), now, error="boom")
    batch = await _batch(runtime, record_id)
    assert (batch.status, batch.executed, batch.errors, batch.error) == (
        BATCH_COMPLETED,
        2,
        0,
        None,
    )
