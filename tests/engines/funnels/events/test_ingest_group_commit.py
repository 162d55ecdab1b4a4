"""Group commit of inbound events (FN-13): concurrent requests share one insert and one commit,
each is answered only after its event is committed, the sender's id still deduplicates (within a
batch and across batches), a failing event fails only its own request, and what arrives while a
batch is written goes as soon as it ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from sqlalchemy import func, select, text

from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.events.ingest_writer import EventWriter
from app.engines.funnels.events.models import InboundEvent
from app.runtime import Runtime
from tests.conftest import eventually, is_postgres
from tests.engines.funnels.factories import count


@pytest.fixture
async def new_writer(runtime: Runtime) -> AsyncIterator[Callable[..., EventWriter]]:
    """Writers on the test's database, closed at the end (a PostgreSQL writer keeps its
    connections between batches)."""
    made: list[EventWriter] = []

    def make(**options: Any) -> EventWriter:
        made.append(EventWriter(runtime.db, **options))
        return made[-1]

    yield make
    for writer in made:
        await writer.aclose()


async def _stored_ids(runtime: Runtime) -> dict[str, int]:
    async with runtime.db.read() as s:
        rows = (await s.execute(select(InboundEvent.external_id, InboundEvent.id))).all()
    return {str(r[0]): int(r[1]) for r in rows}


async def test_fn13_a_thousand_concurrent_events_share_batches_and_each_is_stored_once(
    runtime: Runtime, tenant, new_writer
) -> None:
    """1,000 events at once, 200 of them repeats of another in the same burst: 800 rows, each
    sender id answered "stored" exactly once and with the id of its row, in two batches of at
    most 500 rows."""
    writer = new_writer(window_seconds=0.002, max_rows=500)
    ws = tenant.workspace_id
    ids = [f"evt-{i % 800}" for i in range(1000)]

    async def send(external_id: str) -> tuple[str, int | None]:
        stored = await writer.store(
            workspace_id=ws,
            source="api",
            name="order_placed",
            external_id=external_id,
            payload={"contact": {"email": f"{external_id}@example.com"}},
            now=runtime.clock.now(),
        )
        return external_id, stored

    answers = await asyncio.gather(*(send(i) for i in ids))
    assert writer.batches == 2
    stored = await _stored_ids(runtime)
    assert len(stored) == 800
    assert await count(runtime, InboundEvent) == 800
    winners = [(eid, row_id) for eid, row_id in answers if row_id is not None]
    assert sorted(eid for eid, _ in winners) == sorted(stored)
    assert all(stored[eid] == row_id for eid, row_id in winners)
    # The same ids again, in a later batch: nothing new is stored.
    again = await asyncio.gather(*(send(f"evt-{i}") for i in range(0, 800, 7)))
    assert all(row_id is None for _, row_id in again)
    assert await count(runtime, InboundEvent) == 800


async def test_fn13_every_answer_is_given_after_its_event_is_committed(
    client, runtime: Runtime, tenant
) -> None:
    """200 concurrent requests through the endpoint: as each 202 arrives, its event is already
    readable from another connection (committed, not merely written)."""
    headers = {"X-Ingest-Token": tenant.ingest_token}
    missing: list[str] = []

    async def post(i: int) -> None:
        body = {"event_id": f"c-{i}", "name": "order_placed", "contact": {"email": "a@b.co"}}
        response = await client.post("/hooks/funnels/events", json=body, headers=headers)
        assert response.status_code == 202, response.text
        row_id = response.json()["id"]
        async with runtime.db.read() as s:
            found = await s.scalar(
                select(func.count()).select_from(InboundEvent).where(InboundEvent.id == row_id)
            )
        if found != 1:
            missing.append(f"c-{i}")

    await asyncio.gather(*(post(i) for i in range(200)))
    assert missing == []
    assert await count(runtime, InboundEvent) == 200
    writer = runtime.resources.require(FunnelsDeps).event_writer
    assert isinstance(writer, EventWriter)
    assert writer.batches < 200, "the requests shared commits"


async def test_fn13_a_failing_event_fails_only_its_own_request(
    runtime: Runtime, tenant, new_writer
) -> None:
    """One event in the batch cannot be written (its payload is not JSON): the batch is written
    again row by row, that request gets the error, the other 49 are stored."""
    writer = new_writer(window_seconds=0.002, max_rows=500)

    async def send(i: int) -> int | None:
        payload: dict[str, object] = {"n": i}
        if i == 17:
            payload["bad"] = object()  # no JSON encoding
        return await writer.store(
            workspace_id=tenant.workspace_id,
            source="api",
            name="order_placed",
            external_id=f"f-{i}",
            payload=payload,
            now=runtime.clock.now(),
        )

    results = await asyncio.gather(*(send(i) for i in range(50)), return_exceptions=True)
    assert isinstance(results[17], Exception)
    assert all(isinstance(r, int) for i, r in enumerate(results) if i != 17)
    stored = await _stored_ids(runtime)
    assert sorted(stored) == sorted(f"f-{i}" for i in range(50) if i != 17)


async def test_fn13_a_repeat_of_a_failed_event_in_the_same_batch_is_tried_on_its_own(
    runtime: Runtime, tenant, new_writer
) -> None:
    """The first occurrence of a sender id fails; its repeat in the same batch is not answered
    "already stored" (nothing was stored) but written on its own."""
    writer = new_writer(window_seconds=0.002, max_rows=500)

    async def send(payload: dict[str, object]) -> int | None:
        return await writer.store(
            workspace_id=tenant.workspace_id,
            source="api",
            name="order_placed",
            external_id="same",
            payload=payload,
            now=runtime.clock.now(),
        )

    first, repeat = await asyncio.gather(
        send({"bad": object()}), send({"good": True}), return_exceptions=True
    )
    assert isinstance(first, Exception)
    assert isinstance(repeat, int)
    assert await _stored_ids(runtime) == {"same": repeat}


async def test_fn13_a_request_that_goes_away_leaves_the_batch_to_the_others(
    runtime: Runtime, tenant, new_writer
) -> None:
    """A request cancelled while it waits for its batch takes nothing from the others: they are
    answered and stored, its event (already in the batch) is stored, and a repeat of its sender
    id in the same batch is answered as already stored."""
    writer = new_writer(window_seconds=0.05, max_rows=500)

    async def send(external_id: str) -> int | None:
        return await writer.store(
            workspace_id=tenant.workspace_id,
            source="api",
            name="order_placed",
            external_id=external_id,
            payload={"id": external_id},
            now=runtime.clock.now(),
        )

    tasks = [asyncio.create_task(send(f"c-{i}")) for i in range(10)]
    await asyncio.sleep(0)  # every event handed over, the window still open
    repeat = asyncio.create_task(send("c-3"))
    tasks[3].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[3], asyncio.CancelledError)
    assert all(isinstance(r, int) for i, r in enumerate(results) if i != 3)
    assert await repeat is None
    assert sorted(await _stored_ids(runtime)) == sorted(f"c-{i}" for i in range(10))


async def test_fn13_without_a_window_each_event_has_its_own_transaction(
    runtime: Runtime, tenant, new_writer
) -> None:
    writer = new_writer(window_seconds=0, max_rows=500)
    results = await asyncio.gather(
        *(
            writer.store(
                workspace_id=tenant.workspace_id,
                source="api",
                name="x",
                external_id=f"w-{i % 5}",
                payload={},
                now=runtime.clock.now(),
            )
            for i in range(10)
        )
    )
    assert writer.batches == 0
    assert sum(r is not None for r in results) == 5
    assert await count(runtime, InboundEvent) == 5


async def test_fn13_events_arriving_during_a_write_go_as_soon_as_it_ends(
    runtime: Runtime, tenant, new_writer
) -> None:
    """One batch at a time, two rows a batch, a window far longer than the test: the first two
    events fill a batch at once; the third, which arrived while it was written, is written as
    soon as it ends instead of after another window."""
    writer = new_writer(window_seconds=60, max_rows=2, max_batches=1)

    async def send(i: int) -> int | None:
        return await writer.store(
            workspace_id=tenant.workspace_id,
            source="api",
            name="order_placed",
            external_id=f"q-{i}",
            payload={},
            now=runtime.clock.now(),
        )

    async with asyncio.timeout(30):  # the window (60 s) would fail this
        results = await asyncio.gather(*(send(i) for i in range(3)))
    assert all(isinstance(r, int) for r in results)
    assert writer.batches == 2
    assert sorted(await _stored_ids(runtime)) == ["q-0", "q-1", "q-2"]


@pytest.mark.skipif(is_postgres(), reason="the SQLite write lock")
async def test_fn13_a_batch_waits_in_line_with_the_process_write_transactions(
    runtime: Runtime, tenant, new_writer
) -> None:
    """The batch's statement goes to SQLite outside a transaction, yet it waits its turn in the
    process's write line (app/db/write_gate.py) like every transaction: while another writer
    holds the lock it is in line, and it writes before a transaction that asked after it. Left
    to SQLite's busy handler, which looks again only every 100 ms after a while, it would lose
    to each transaction that asked later."""
    gate = runtime.db.write_gate
    assert gate is not None
    writer = new_writer(window_seconds=0.001, max_rows=10)
    holding, release = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    async def holder() -> None:
        async with runtime.db.write() as uow:
            await uow.session.execute(text("SELECT 1"))
            holding.set()
            await release.wait()

    async def batch() -> None:
        await writer.store(
            workspace_id=tenant.workspace_id,
            source="api",
            name="order_placed",
            external_id="in-line",
            payload={},
            now=runtime.clock.now(),
        )
        order.append("batch")

    async def later_transaction() -> None:
        async with runtime.db.write() as uow:
            await uow.session.execute(text("SELECT 1"))
        order.append("transaction")

    first = asyncio.create_task(holder())
    await holding.wait()
    tasks = [asyncio.create_task(batch())]
    await eventually(lambda: _true(gate.waiting == 1))  # the batch, in line
    tasks.append(asyncio.create_task(later_transaction()))
    await eventually(lambda: _true(gate.waiting == 2))
    release.set()
    async with asyncio.timeout(30):
        await asyncio.gather(first, *tasks)
    assert order == ["batch", "transaction"]
    assert writer.batches == 1  # written as the batch, not one by one after "database is locked"
    assert (gate.waiting, gate.holders) == (0, 0)
    assert sorted(await _stored_ids(runtime)) == ["in-line"]


async def _true(value: bool) -> bool:
    return value
