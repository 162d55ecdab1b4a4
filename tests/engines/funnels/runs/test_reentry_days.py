"""FN-3 with ``settings.reentry_days``: a funnel open to re-entry at most once per N days. A contact
who entered less than N days ago is not entered again — on the deterministic clock across the
boundary, for the trigger matcher's batches and the manual enrolment's pieces (set-wise), by every
version of the funnel, and against a concurrent writer (see test_reentry_days_postgres)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, insert, select, update

from app.engines.funnels.events.claim.triggers import enroll, match_events
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import RUN_COMPLETED, ContactEvent, Run
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.due.entry_gate import EntryGate
from app.runtime import Runtime
from tests.engines.funnels.factories import (
    Engine,
    Space,
    bulk_contacts,
    contact,
    graph,
    node,
    published,
    republish,
    runs_of,
    setup_names,
)

WEEKLY = {"reentry": True, "reentry_days": 7}


def tagging(settings: dict[str, Any], trigger: dict[str, Any] | None = None) -> dict[str, Any]:
    """A one-step funnel: a run ends as soon as it is executed, so only the days hold re-entry."""
    return graph(
        node("add_tag", "t", tag="in"),
        triggers=[trigger or {"kind": "api_event", "event": "ping"}],
        settings=settings,
    )


async def ping(runtime: Runtime, ws: int, contact_ids: list[int], tag: str) -> None:
    """One stored ``ping`` event per contact id (repeats allowed), unmatched, in one insert."""
    now = runtime.clock.now()
    rows = [
        {
            "workspace_id": ws,
            "contact_id": cid,
            "name": "ping",
            "source": "api",
            "external_id": f"{tag}-{i}",
            "properties": {},
            "occurred_at": now,
            "created_at": now,
        }
        for i, cid in enumerate(contact_ids)
    ]
    async with runtime.db.write() as uow:
        await uow.session.execute(insert(ContactEvent), rows)


async def end_runs(runtime: Runtime, funnel_id: int) -> None:
    """End every run of the funnel at once (what the runner does to a one-step run, without
    executing 1,000 of them): only the days hold the contacts back afterwards."""
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Run)
            .where(Run.funnel_id == funnel_id)
            .values(status=RUN_COMPLETED, ended_at=runtime.clock.now(), wake_at=None)
        )


async def runs_per_contact(runtime: Runtime, funnel_id: int) -> dict[int, int]:
    async with runtime.db.read() as s:
        rows = await s.execute(
            select(Run.contact_id, func.count())
            .where(Run.funnel_id == funnel_id)
            .group_by(Run.contact_id)
        )
        return {cid: n for cid, n in rows.all()}


async def test_fn3_reentry_once_per_7_days_across_the_boundary(
    engine: Engine, space: Space
) -> None:
    rt, clock, ws = engine.runtime, engine.clock, space.workspace_id
    await setup_names(rt, ws, tags=["in"])
    funnel_id, _ = await published(rt, ws, tagging(WEEKLY))
    ann = await contact(rt, ws, "ann@x.test")
    start = clock.now()

    await ping(rt, ws, [ann], "first")
    await engine.drive()
    assert [r.status for r in await runs_of(rt, funnel_id)] == ["completed"]

    # Ended, but entered three days ago, then one second before the seventh day: not again.
    clock.advance(days=3)
    await ping(rt, ws, [ann], "day3")
    await engine.drive()
    clock.set(start + timedelta(days=7) - timedelta(seconds=1))
    await ping(rt, ws, [ann], "almost")
    await engine.drive()
    assert len(await runs_of(rt, funnel_id)) == 1

    # Seven days after the first entry, exactly: in again; and then not for another seven.
    clock.set(start + timedelta(days=7))
    await ping(rt, ws, [ann], "day7")
    await engine.drive()
    runs = await runs_of(rt, funnel_id)
    assert [r.entered_at for r in runs] == [start, start + timedelta(days=7)]
    clock.advance(days=6)
    await ping(rt, ws, [ann], "day13")
    await engine.drive()
    assert len(await runs_of(rt, funnel_id)) == 2


async def test_fn3_without_days_a_contact_reenters_as_soon_as_the_run_ended(
    engine: Engine, space: Space
) -> None:
    """The days are what holds them back: the same funnel with ``reentry`` alone admits."""
    rt, ws = engine.runtime, space.workspace_id
    await setup_names(rt, ws, tags=["in"])
    funnel_id, _ = await published(rt, ws, tagging({"reentry": True}))
    ann = await contact(rt, ws, "ann@x.test")
    for i in range(3):
        await ping(rt, ws, [ann], f"p{i}")
        await engine.drive()
    assert len(await runs_of(rt, funnel_id)) == 3


async def test_fn3_reentry_days_hold_set_wise_in_the_matchers_batches(
    engine: Engine, space: Space
) -> None:
    """1,200 contacts, each pinged twice in one batch of 2,400 events: one run each; a week
    minus a minute later, a batch mixing them with 300 newcomers enters only the newcomers; a
    week after the first entry everyone is in again."""
    rt, clock, ws = engine.runtime, engine.clock, space.workspace_id
    await setup_names(rt, ws, tags=["in"])
    funnel_id, _ = await published(rt, ws, tagging(WEEKLY))
    people = await bulk_contacts(rt, ws, 1_500)
    old, new = people[:1_200], people[1_200:]
    start = clock.now()
    await ping(rt, ws, old + old, "first")
    events, started = await match_events(
        rt.db, now=clock.now(), limit=5_000, segments=evaluate_segments
    )
    assert (events, started) == (2_400, 1_200)
    await end_runs(rt, funnel_id)

    clock.set(start + timedelta(days=7) - timedelta(minutes=1))
    await ping(rt, ws, old + new, "second")
    events, started = await match_events(
        rt.db, now=clock.now(), limit=5_000, segments=evaluate_segments
    )
    assert (events, started) == (1_500, 300)
    await end_runs(rt, funnel_id)
    counts = await runs_per_contact(rt, funnel_id)
    assert set(counts.values()) == {1}
    assert set(counts) == set(people)

    clock.set(start + timedelta(days=7))
    await ping(rt, ws, old, "third")
    events, started = await match_events(
        rt.db, now=clock.now(), limit=5_000, segments=evaluate_segments
    )
    assert (events, started) == (1_200, 1_200)
    # The gate holds one stamp per contact who entered, whatever the number of entries.
    async with rt.db.read() as s:
        gate = await s.scalar(
            select(func.count()).select_from(EntryGate).where(EntryGate.funnel_id == funnel_id)
        )
    assert gate == 1_500


async def test_fn3_reentry_days_hold_for_manual_enrolment_and_every_path(
    engine: Engine, space: Space
) -> None:
    """Enrolment (pieces of 500 in one statement each) and ``enter`` (other triggers, the
    ``enter_funnel`` action) follow the same rule."""
    rt, clock, ws = engine.runtime, engine.clock, space.workspace_id
    await setup_names(rt, ws, tags=["in"])
    funnel_id, version = await published(rt, ws, tagging(WEEKLY, {"kind": "manual"}))
    people = await bulk_contacts(rt, ws, 1_100)
    async with rt.db.write() as uow:
        assert await enroll(uow.session, version, now=clock.now()) == 1_100
    await end_runs(rt, funnel_id)
    clock.advance(days=2)
    async with rt.db.write() as uow:
        assert await enroll(uow.session, version, now=clock.now()) == 0
        assert (
            await enter(uow.session, version=version, contact_id=people[0], now=clock.now()) is None
        )
    clock.advance(days=5)
    async with rt.db.write() as uow:
        assert await enter(uow.session, version=version, contact_id=people[0], now=clock.now())
        assert await enroll(uow.session, version, now=clock.now()) == 1_099


async def test_fn3_reentry_days_count_entries_of_earlier_versions(
    engine: Engine, space: Space
) -> None:
    """A contact who entered version 1 (before the funnel limited re-entry) three days ago does
    not enter version 2, which allows once per 7 days; the runs themselves are the history."""
    rt, clock, ws = engine.runtime, engine.clock, space.workspace_id
    await setup_names(rt, ws, tags=["in"])
    funnel_id, _ = await published(rt, ws, tagging({"reentry": True}))
    ann = await contact(rt, ws, "ann@x.test")
    bob = await contact(rt, ws, "bob@x.test")
    await ping(rt, ws, [ann], "v1")
    await engine.drive()
    clock.advance(days=3)
    await republish(rt, ws, funnel_id, tagging(WEEKLY))
    await ping(rt, ws, [ann, bob], "v2")
    await engine.drive()
    assert await runs_per_contact(rt, funnel_id) == {ann: 1, bob: 1}
    clock.advance(days=4)
    await ping(rt, ws, [ann, bob], "later")
    await engine.drive()
    assert await runs_per_contact(rt, funnel_id) == {ann: 2, bob: 1}
