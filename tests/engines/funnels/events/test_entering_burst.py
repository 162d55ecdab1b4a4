"""Contacts entering at scale (FN-12): a 10,000-contact burst matched set-wise into a funnel that
forbids re-entry — exactly one run per admitted contact, none for those its entry predicate turns
away, also with two matchers on their own connection pools claiming the events side by side."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, insert, select

from app.db.session import Database
from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import Contact, ContactEvent, Run
from app.runtime import Runtime
from app.settings import Settings
from tests.engines.funnels.factories import graph, node, published, setup_names

BURST = 10_000
pytestmark = pytest.mark.slow


async def _burst(runtime: Runtime, ws: int) -> None:
    """10,000 contacts, one in ten named "Out"; each with a ``contact_created`` and a
    ``tag_added`` event, both of which the funnel's triggers match."""
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": ws,
                    "email": f"b{i}@burst.test",
                    "first_name": "Out" if i % 10 == 0 else "In",
                    "last_name": "",
                    "timezone": "UTC",
                    "fields": {},
                    "consent": {},
                    "suppressed": {},
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(BURST)
            ],
        )
        ids = list(await uow.session.scalars(select(Contact.id).where(Contact.workspace_id == ws)))
        events = []
        for cid in ids:
            for name, props in (("contact_created", {}), ("tag_added", {"tag": "vip"})):
                events.append(
                    {
                        "workspace_id": ws,
                        "contact_id": cid,
                        "name": name,
                        "source": "system",
                        "properties": props,
                        "occurred_at": now,
                        "created_at": now,
                    }
                )
        for start in range(0, len(events), 2000):
            await uow.session.execute(insert(ContactEvent), events[start : start + 2000])


async def _funnel(runtime: Runtime, ws: int) -> int:
    await setup_names(runtime, ws, tags=["entered", "vip"])
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            node("add_tag", "t", tag="entered"),
            triggers=[{"kind": "contact_created"}, {"kind": "tag_added", "tag": "vip"}],
            entry_predicate={"kind": "field", "field": "first_name", "op": "eq", "value": "In"},
        ),
    )
    return funnel_id


async def _drain(db: Database, runtime: Runtime) -> int:
    started = 0
    while True:
        events, entered = await match_events(
            db, now=runtime.clock.now(), limit=500, segments=evaluate_segments
        )
        started += entered
        if events == 0:
            return started


async def _check(runtime: Runtime, funnel_id: int) -> None:
    async with runtime.db.read() as s:
        per_contact = (
            await s.execute(
                select(Run.contact_id, func.count())
                .where(Run.funnel_id == funnel_id)
                .group_by(Run.contact_id)
            )
        ).all()
        names = dict(
            (
                await s.execute(
                    select(Contact.id, Contact.first_name).where(
                        Contact.id.in_([c for c, _ in per_contact])
                    )
                )
            ).all()
        )
        unmatched = await s.scalar(
            select(func.count()).select_from(ContactEvent).where(ContactEvent.matched_at.is_(None))
        )
    assert len(per_contact) == BURST * 9 // 10
    assert {n for _, n in per_contact} == {1}, "one run per contact"
    assert set(names.values()) == {"In"}, "the entry predicate turned the others away"
    assert unmatched == 0


async def test_fn12_a_10000_contact_burst_enters_once_each(runtime: Runtime, tenant) -> None:
    ws = tenant.workspace_id
    funnel_id = await _funnel(runtime, ws)
    await _burst(runtime, ws)
    assert await _drain(runtime.db, runtime) == BURST * 9 // 10
    await _check(runtime, funnel_id)


@pytest.mark.postgres
async def test_fn12_two_matchers_on_their_own_pools_start_one_run_per_contact(
    runtime: Runtime, settings: Settings, tenant
) -> None:
    ws = tenant.workspace_id
    funnel_id = await _funnel(runtime, ws)
    await _burst(runtime, ws)
    pools = [Database(settings.database) for _ in range(2)]
    try:
        started = await asyncio.gather(*(_drain(db, runtime) for db in pools))
    finally:
        for db in pools:
            await db.dispose()
    assert sum(started) == BURST * 9 // 10
    await _check(runtime, funnel_id)
