"""The deliverer renews its leases while a batch is on the wire (issue 11 item 2): a batch longer
than its lease — a slow SMTP server — is not taken over by a second deliverer, and each message
arrives once at a real SMTP server (aiosmtpd), with its stable Message-ID."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from sqlalchemy import func, select

from app.clock import SystemClock
from app.db.session import Database
from app.engines.funnels.models import OUTBOX_PENDING, OUTBOX_SENT, OutboxEffect
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.runs.due.entry import enter
from app.settings import FunnelSettings
from tests.conftest import eventually
from tests.engines.funnels.factories import Engine, Space, contact, email_node, graph, published

# A lease of seconds, renewed every third of it: a loaded machine's pauses (a renewal waiting a
# second for the write lock) must not lose it by themselves, or the test would see a takeover it
# did not cause.
LEASE_SECONDS = 3
MESSAGES = 6
SMTP_DELAY = 3.2  # per message: longer than the lease, so a batch is too


async def _pending_due_times(db: Database) -> list[datetime]:
    """When each pending effect is due (a leased one: when its lease expires)."""
    async with db.read() as s:
        return list(
            await s.scalars(
                select(OutboxEffect.next_attempt_at).where(OutboxEffect.status == OUTBOX_PENDING)
            )
        )


async def test_a_batch_longer_than_its_lease_is_not_taken_over_and_each_message_goes_once(
    engine: Engine, space: Space
) -> None:
    rt = engine.runtime
    ws = space.workspace_id
    _, version = await published(rt, ws, graph(email_node("hello", subject="Hello")))
    ids = [await contact(rt, ws, f"slow{i}@x.test") for i in range(MESSAGES)]
    async with rt.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=rt.clock.now())
    await engine.runner.run_batch(owner="runner", now=rt.clock.now())
    assert len(await _pending_due_times(rt.db)) == MESSAGES

    clock = SystemClock()
    settings = FunnelSettings(lease_seconds=LEASE_SECONDS, deliver_batch=MESSAGES // 2)
    deliverers = [
        Deliverer(
            rt.db,
            settings,
            engine.deliverer.senders,
            lease_seconds=LEASE_SECONDS,
            clock=clock,
            # One message at a time: a batch of three then outlives its lease three times over,
            # so it lives on renewals alone.
            in_flight=1,
        )
        for _ in range(2)
    ]
    batch_seconds: list[float] = []

    async def due_or_none_left() -> bool:
        due_times = await _pending_due_times(rt.db)
        return not due_times or min(due_times) <= clock.now()

    async def deliver_all(index: int, deliverer: Deliverer) -> None:
        while True:
            started = time.perf_counter()
            result = await deliverer.run_batch(owner=f"deliverer-{index}", now=clock.now)
            if result.leased:
                batch_seconds.append(time.perf_counter() - started)
                continue
            if not await _pending_due_times(rt.db):
                return
            # The rest is leased by another deliverer: wait until some of it is due again (its
            # lease given back or expired) or none is left, then try again.
            await eventually(due_or_none_left, timeout=60)

    engine.sink.slow_down(SMTP_DELAY)
    try:
        await asyncio.wait_for(
            asyncio.gather(*(deliver_all(i, d) for i, d in enumerate(deliverers))), 60
        )
    finally:
        engine.sink.slow_down(0)

    assert max(batch_seconds) > LEASE_SECONDS, "a batch really outlived its lease"
    counts = engine.sink.count_by_message_id()
    assert len(counts) == MESSAGES
    assert [m for m, n in counts.items() if n > 1] == [], "no message sent twice"
    async with rt.db.read() as s:
        sent = await s.scalar(
            select(func.count()).select_from(OutboxEffect).where(OutboxEffect.status == OUTBOX_SENT)
        )
    assert sent == MESSAGES
