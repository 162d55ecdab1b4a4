"""Events received while the job queue's Redis is down (FN-13): the receivers answer as usual,
since the event is stored before the queue is asked to process it, and the sweep's backstop pass
(``funnels.triggers``, every 10 s) processes it once Redis answers. A 503 would make the sender
retry an event already stored. The outage is logged once, not per event.

Redis down is real: a closed port, and the test Redis behind a loopback proxy that is stopped."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx
import pytest

from app.clock import ManualClock
from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.events.due.schedule_triggers import tick
from app.engines.funnels.events.ingest import ProcessingRequests
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.models import ContactEvent
from app.runtime import Runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.arq_workers import ArqWorkers
from app.scheduling.unavailable import QueueUnavailable
from tests.conftest import TEST_REDIS_URL, eventually
from tests.engines.funnels.factories import contact, count, settle, signed
from tests.factories import Tenant
from tests.scheduling.helpers import running
from tests.scheduling.redis_proxy import Proxy, closed_port, proxy_to

EVENTS = "/hooks/funnels/events"


def api_event(event_id: str) -> dict[str, object]:
    return {"event_id": event_id, "name": "order_placed", "contact": {"email": "ann@example.com"}}


@contextmanager
def queue_at(runtime: Runtime, url: str) -> Iterator[ArqQueue]:
    """Requests, the event receivers' processing requests and jobs use an arq queue on ``url``."""
    processing = runtime.resources.require(FunnelsDeps).processing
    assert isinstance(processing, ProcessingRequests)
    usual = runtime.queue
    queue = ArqQueue(
        runtime.db, runtime.clock, url, f"sweepline-test-down-{uuid.uuid4().hex[:8]}", timeout=0.5
    )
    runtime.queue = processing.queue = queue
    try:
        yield queue
    finally:
        runtime.queue = processing.queue = usual


def outage_lines(caplog: pytest.LogCaptureFixture) -> int:
    return sum(
        "is not reachable" in r.getMessage()
        for r in caplog.records
        if r.name == "app.scheduling.unavailable"
    )


async def unprocessed(runtime: Runtime) -> int:
    return await count(runtime, InboundEvent, InboundEvent.processed_at.is_(None))


async def test_receivers_answer_and_store_the_event_while_redis_refuses_connections(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    ws = tenant.workspace_id
    await contact(runtime, ws, "ann@example.com")
    token = {"X-Ingest-Token": tenant.ingest_token}
    booking = {
        "id": "bk-down-1",
        "type": "booking.created",
        "booking": {"id": "b1", "start": "2026-03-04T10:00:00Z", "attendee": {"email": "c@x.test"}},
    }
    with queue_at(runtime, f"redis://127.0.0.1:{closed_port()}/0") as queue:
        try:
            answers = []
            for n in range(3):
                # Past the nudges' half second and the outage's one try a second: each of
                # these asks Redis, and is refused.
                clock.advance(1.0)
                answers.append(await client.post(EVENTS, json=api_event(f"e-{n}"), headers=token))
            clock.advance(1.0)
            report = {"event_id": "d-1", "kind": "delivered", "email": "ann@example.com"}
            answers.append(await client.post("/hooks/funnels/delivery", json=report, headers=token))
            clock.advance(1.0)
            body, headers = signed(tenant.webhook_secret, booking, at=int(clock.now().timestamp()))
            answers.append(
                await client.post(f"/hooks/funnels/{ws}/bookings", content=body, headers=headers)
            )
            assert queue.outage.down
        finally:
            await queue.aclose()
    assert [r.status_code for r in answers] == [202] * 5, [r.text for r in answers]
    assert all(r.json()["stored"] for r in answers)
    assert await count(runtime, InboundEvent) == 5
    assert await unprocessed(runtime) == 5  # left for the sweep's backstop pass
    assert outage_lines(caplog) == 1
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []
    # What the sweep's pass runs once the queue answers (the ingest job) applies them.
    await settle(runtime)
    assert await unprocessed(runtime) == 0
    assert await count(runtime, ContactEvent, ContactEvent.name == "order_placed") == 3


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    async with proxy_to(TEST_REDIS_URL) as made:
        yield made


@pytest.mark.redis
async def test_an_event_stored_while_redis_is_down_is_applied_by_the_sweep_once_it_is_back(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, proxy: Proxy
) -> None:
    await contact(runtime, tenant.workspace_id, "ann@example.com")
    with queue_at(runtime, proxy.url) as queue:
        workers = ArqWorkers(
            queue, runtime.registry, runtime.context, concurrency=4, shutdown_grace=1.0
        )
        try:
            async with running(workers):
                await proxy.stop()
                response = await client.post(
                    EVENTS,
                    json=api_event("e-down"),
                    headers={"X-Ingest-Token": tenant.ingest_token},
                )
                assert response.status_code == 202, response.text
                assert response.json()["stored"] is True
                await proxy.start()

                async def swept() -> bool:
                    # The sweep's tick, as the sweeper runs it every 10 s; a tick while the
                    # outage's one try a second is used up fails, as it would in the sweeper.
                    try:
                        await tick(runtime.context(job_id="test-tick"), runtime.clock.now())
                    except QueueUnavailable:
                        return False
                    return True

                await eventually(swept)
                await eventually(lambda: _none_left(runtime), timeout=20)
        finally:
            await _delete_keys(queue)
            await queue.aclose()
    assert await count(runtime, ContactEvent, ContactEvent.name == "order_placed") == 1


async def _none_left(runtime: Runtime) -> bool:
    return await unprocessed(runtime) == 0


async def _delete_keys(queue: ArqQueue) -> None:
    pool = await queue.pool()
    keys = await pool.keys(f"{queue.base_name}*")
    if keys:
        await pool.delete(*keys)
