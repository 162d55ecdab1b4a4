"""Recording a group of confirmed sends (FN-7): the effects still leased to the recorder are marked
sent and each gets one delivery event; an effect another deliverer took over meanwhile is left to
it, with no event. On PostgreSQL such a group is one statement written alone (no transaction); on
SQLite it is a unit of work: the suite runs on both."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from app.clock import ManualClock
from app.engines.funnels.models import (
    OUTBOX_PENDING,
    OUTBOX_SENT,
    DeliveryEvent,
    OutboxEffect,
)
from app.engines.funnels.outbox.records.outcomes import record
from app.engines.funnels.outbox.work.outcomes import Outcome
from app.engines.funnels.runs.due.entry import enter
from app.settings import FunnelSettings
from tests.engines.funnels.factories import Engine, Space, contact, email_node, graph, published


async def test_sends_still_ours_are_recorded_with_one_event_each_and_a_taken_over_one_is_left(
    engine: Engine, space: Space, clock: ManualClock, funnel_settings: FunnelSettings
) -> None:
    rt, ws = engine.runtime, space.workspace_id
    _, version = await published(rt, ws, graph(email_node("hello", subject="Hello")))
    for i in range(3):
        who = await contact(rt, ws, f"c{i}@x.test")
        async with rt.db.write() as uow:
            await enter(uow.session, version=version, contact_id=who, now=clock.now())
    await engine.drive(deliver=False)
    leased = await engine.deliverer.lease(owner="me", now=clock.now(), limit=10)
    assert len(leased) == 3
    taken = leased[0]
    async with rt.db.write() as uow:
        await uow.session.execute(
            update(OutboxEffect).where(OutboxEffect.id == taken.id).values(lease_owner="other")
        )
    at = clock.now() + timedelta(seconds=2)
    group = [
        Outcome(e, "sent", at - timedelta(seconds=1), OUTBOX_SENT, "sent", f"250 ok {e.id}")
        for e in leased
    ]

    await record(rt.db, funnel_settings, group, "me", at, ({}, [], at))

    async with rt.db.read() as s:
        rows = {e.id: e for e in await s.scalars(select(OutboxEffect))}
        events = list(await s.scalars(select(DeliveryEvent).order_by(DeliveryEvent.outbox_id)))
    ours = sorted(e.id for e in leased[1:])
    assert [(rows[i].status, rows[i].finished_at, rows[i].lease_owner) for i in ours] == [
        (OUTBOX_SENT, at, None)
    ] * 2
    assert (rows[taken.id].status, rows[taken.id].lease_owner) == (OUTBOX_PENDING, "other")
    assert [
        (e.outbox_id, e.contact_id, e.workspace_id, e.kind, e.detail, e.at) for e in events
    ] == [
        (i, rows[i].contact_id, ws, "sent", f"250 ok {i}", at - timedelta(seconds=1)) for i in ours
    ]


async def test_a_group_recorded_twice_gets_its_events_once(
    engine: Engine, space: Space, clock: ManualClock, funnel_settings: FunnelSettings
) -> None:
    """A repeated recording (a retried call) finds the effects no longer pending: nothing more."""
    rt, ws = engine.runtime, space.workspace_id
    _, version = await published(rt, ws, graph(email_node("hello", subject="Hello")))
    who = await contact(rt, ws, "c@x.test")
    async with rt.db.write() as uow:
        await enter(uow.session, version=version, contact_id=who, now=clock.now())
    await engine.drive(deliver=False)
    (effect,) = await engine.deliverer.lease(owner="me", now=clock.now(), limit=10)
    at = clock.now()
    group = [Outcome(effect, "sent", at, OUTBOX_SENT, "sent", "250 ok")]

    await record(rt.db, funnel_settings, group, "me", at, ({}, [], at))
    await record(rt.db, funnel_settings, group, "me", at, ({}, [], at))

    async with rt.db.read() as s:
        assert len(list(await s.scalars(select(DeliveryEvent.id)))) == 1
