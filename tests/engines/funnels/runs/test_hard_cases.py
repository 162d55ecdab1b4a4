"""The seven hard cases of the funnels specification (§7), each on a deterministic clock.

Cases 3, 4 and 7 are also run with real concurrency on PostgreSQL in
``test_hard_cases_postgres.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event, select

from app.engines.funnels.contacts.deletion import delete_contact
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.contacts.store import ContactData, update_contact
from app.engines.funnels.definitions.graph import decode_definition
from app.engines.funnels.definitions.problems import KnownNames
from app.engines.funnels.definitions.validate import validate
from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import (
    OUTBOX_CANCELLED,
    OUTBOX_SKIPPED,
    RUN_ACTIVE,
    RUN_CANCELLED,
    RUN_COMPLETED,
    Contact,
    DeliveryEvent,
    Run,
)
from app.engines.funnels.runs.due.entry import enter
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    count,
    effects,
    email_node,
    entered_contacts,
    graph,
    node,
    published,
    republish,
    runs_of,
)


async def test_case1_a_funnel_that_loops_back_with_a_wait(engine: Engine, space: Space) -> None:
    """Hard case 1: a loop is legitimate when it contains a wait (the validator enforces it)."""
    ws = space.workspace_id
    loop = graph(
        email_node("tick", subject="daily", next="w"), node("wait", "w", days=1, next="tick")
    )
    assert validate(decode_definition(loop), KnownNames()) == []
    bad = graph(email_node("tick", subject="daily", next="tick"))
    assert [p.rule for p in validate(decode_definition(bad), KnownNames())] == ["FN-23"]
    funnel_id, version = await published(engine.runtime, ws, loop)
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    for _ in range(3):
        await engine.advance(days=1)
    assert len(engine.sink.messages) == 4
    assert len(engine.sink.count_by_message_id()) == 4  # a new effect per pass, none repeated
    [run] = await runs_of(engine.runtime, funnel_id)
    assert run.status == RUN_ACTIVE


async def test_case2_unsubscribed_mid_way_hears_nothing(engine: Engine, space: Space) -> None:
    """Hard case 2: suppression is checked when the deliverer sends, not when the run queues."""
    ws = space.workspace_id
    _, version = await published(
        engine.runtime,
        ws,
        graph(
            email_node("one", subject="one", next="w"),
            node("wait", "w", days=2, next="two"),
            email_node("two", subject="two"),
        ),
    )
    leaving = await contact(engine.runtime, ws, "leaving@x.test")
    withdrawing = await contact(engine.runtime, ws, "withdrawing@x.test")
    staying = await contact(engine.runtime, ws, "staying@x.test")
    async with engine.runtime.db.write() as uow:
        for cid in (leaving, withdrawing, staying):
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    assert len(engine.sink.messages) == 3
    await engine.advance(days=1)  # Tuesday: one unsubscribes, one withdraws consent
    async with engine.runtime.db.write() as uow:
        now = engine.clock.now()
        await update_contact(
            uow.session, ws, leaving, ContactData(suppressed={"email": "unsubscribed"}), now
        )
        await update_contact(
            uow.session, ws, withdrawing, ContactData(consent={"email": "withdrawn"}), now
        )
    # Even an effect already queued before the change is stopped at the door.
    await engine.drive(deliver=False)
    await engine.advance(days=1)  # Thursday
    second = [m.to[0] for m in engine.sink.messages if m.subject == "two"]
    assert second == ["staying@x.test"]
    skipped = await effects(engine.runtime, status=OUTBOX_SKIPPED)
    assert {e.contact_id for e in skipped} == {leaving, withdrawing}
    async with engine.runtime.db.read() as s:
        reasons = set(
            await s.scalars(select(DeliveryEvent.detail).where(DeliveryEvent.kind == "suppressed"))
        )
    assert reasons == {"suppressed on email: unsubscribed", "consent withdrawn for email"}


async def test_case3_edited_funnel_people_in_flight_walk_their_version(
    engine: Engine, space: Space
) -> None:
    """Hard case 3: runs in flight walk the version they entered to the end; new entrants walk
    the new one (200 here; 10,000 with concurrent workers on PostgreSQL)."""
    ws = space.workspace_id
    v1 = graph(node("wait", "w", days=1, next="e"), email_node("e", subject="v1"))
    funnel_id, version1 = await published(engine.runtime, ws, v1)
    await entered_contacts(engine.runtime, ws, version1, 200, prefix="old")
    await engine.drive()
    v2 = graph(node("wait", "w", days=1, next="x"), email_node("x", subject="v2"))
    version2 = await republish(engine.runtime, ws, funnel_id, v2)
    newcomer = await contact(engine.runtime, ws, "new@x.test")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version2, contact_id=newcomer, now=engine.clock.now())
    await engine.drive()
    await engine.advance(days=1)
    subjects: dict[str, list[str]] = {}
    for m in engine.sink.messages:
        subjects.setdefault(m.subject, []).append(m.to[0])
    assert len(subjects["v1"]) == 200
    assert subjects["v2"] == ["new@x.test"]
    runs = await runs_of(engine.runtime, funnel_id)
    assert {r.version_id for r in runs if r.contact_id != newcomer} == {version1.id}
    assert all(r.status == RUN_COMPLETED for r in runs)


async def test_case4_same_trigger_twice_in_one_second_is_one_run(
    engine: Engine, space: Space
) -> None:
    """Hard case 4: two events in the same second, matched concurrently: one run, because the
    uniqueness is an index."""
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(node("wait", "w", days=1), triggers=[{"kind": "api_event", "event": "signup"}]),
    )
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        for external in ("evt-1", "evt-2"):
            await record_event(
                uow.session,
                workspace_id=ws,
                contact_id=cid,
                name="signup",
                source="api",
                external_id=external,
                now=engine.clock.now(),
            )
    results = await asyncio.gather(
        match_events(
            engine.runtime.db, now=engine.clock.now(), limit=1, segments=evaluate_segments
        ),
        match_events(
            engine.runtime.db, now=engine.clock.now(), limit=1, segments=evaluate_segments
        ),
    )
    assert sorted(r[0] for r in results) == [1, 1]
    assert len(await runs_of(engine.runtime, funnel_id)) == 1

    # And entering directly from many tasks at once.
    async def attempt() -> int | None:
        async with engine.runtime.db.write() as uow:
            return await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())

    assert [r for r in await asyncio.gather(*(attempt() for _ in range(10))) if r] == []
    assert len(await runs_of(engine.runtime, funnel_id)) == 1


async def test_case5_deleted_contact_run_ends_and_pending_effects_are_cancelled(
    engine: Engine, space: Space
) -> None:
    """Hard case 5: a deletion that leaves a sequence addressed to someone is not a deletion."""
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node("quiet_hours", "q", start_hour=0, end_hour=12, next="held"),
            email_node("held", subject="held", next="w"),
            node("wait", "w", days=1, next="later"),
            email_node("later", subject="later"),
        ),
    )
    cid = await contact(engine.runtime, ws, "gone@x.test", first_name="Gone")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    [pending] = await effects(engine.runtime)
    assert pending.next_attempt_at > engine.clock.now()
    async with engine.runtime.db.write() as uow:
        await delete_contact(uow.session, ws, cid, engine.clock.now())
    [run] = await runs_of(engine.runtime, funnel_id)
    assert (run.status, run.exit_reason) == (RUN_CANCELLED, "contact_deleted")
    [cancelled] = await effects(engine.runtime)
    assert cancelled.status == OUTBOX_CANCELLED
    await engine.advance(days=2)
    assert engine.sink.messages == []
    async with engine.runtime.db.read() as s:
        gone = await s.get(Contact, cid)
    assert gone is not None
    assert (gone.email, gone.first_name, gone.fields) == (None, "", {})


async def test_case6_wait_crossing_dst_lands_at_local_nine(engine: Engine, space: Space) -> None:
    """Hard case 6: "three days, at 9 am" is 09:00 local before and after the change (Berlin
    moves to summer time on 29 March 2026; New York on 8 March)."""
    ws = space.workspace_id
    _, version = await published(
        engine.runtime,
        ws,
        graph(node("wait", "w", days=3, hour=9, next="e"), email_node("e", subject="nine")),
    )
    berlin = await contact(engine.runtime, ws, "b@x.test", timezone="Europe/Berlin")
    engine.clock.set(datetime(2026, 3, 27, 8, 0, tzinfo=UTC))  # Friday 09:00 CET
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=berlin, now=engine.clock.now())
    await engine.drive()
    async with engine.runtime.db.read() as s:
        wake = await s.scalar(select(Run.wake_at).where(Run.contact_id == berlin))
    assert wake == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)  # 09:00 CEST
    await engine.advance(days=3, hours=-1, seconds=-1)
    assert engine.sink.messages == []
    await engine.advance(seconds=1)
    assert [m.to[0] for m in engine.sink.messages] == ["b@x.test"]


async def test_case6_new_york_wait_before_and_after_the_change(
    engine: Engine, space: Space
) -> None:
    ws = space.workspace_id
    _, version = await published(engine.runtime, ws, graph(node("wait", "w", days=3, hour=9)))
    cid = await contact(engine.runtime, ws, "n@x.test", timezone="America/New_York")
    engine.clock.set(datetime(2026, 3, 6, 14, 0, tzinfo=UTC))  # Friday 09:00 EST
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    async with engine.runtime.db.read() as s:
        wake = await s.scalar(select(Run.wake_at).where(Run.contact_id == cid))
    assert wake == datetime(2026, 3, 9, 13, 0, tzinfo=UTC)  # Monday 09:00 EDT


ADVANCE_STATEMENTS = ("UPDATE FUNNEL_RUNS SET STATUS", "UPDATE FUNNEL_RUNS AS R SET STATUS")


@pytest.fixture
def kill_switch(engine: Engine) -> Iterator[dict[str, Any]]:
    """Makes the next run-advancement statement fail, as if the worker died right after it had
    written the outbox rows and before the advancement reached the database (its statement is the
    SQL layer's on SQLite, the driver's array form on PostgreSQL: both pass the statement events)."""
    state: dict[str, Any] = {"armed": False, "fired": 0}
    target = engine.runtime.db.write_engine.sync_engine

    def die_at(statement: str) -> None:
        if state["armed"] and statement.lstrip().upper().startswith(ADVANCE_STATEMENTS):
            state["armed"] = False
            state["fired"] += 1
            raise ConnectionResetError("worker died between send and advance")

    def before(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
    ) -> None:
        die_at(statement)

    event.listen(target, "before_cursor_execute", before)
    yield state
    event.remove(target, "before_cursor_execute", before)


async def test_case7_worker_dies_between_send_and_advance(
    engine: Engine, space: Space, kill_switch: dict[str, Any]
) -> None:
    """Hard case 7: effects and advancement are one transaction: both or neither; the retry
    delivers each message exactly once."""
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(email_node("one", subject="one", next="two"), email_node("two", subject="two")),
    )
    ids = [await contact(engine.runtime, ws, f"c{i}@x.test") for i in range(5)]
    async with engine.runtime.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    kill_switch["armed"] = True
    with pytest.raises(ConnectionResetError):
        await engine.runner.run_batch(owner="doomed", now=engine.clock.now())
    assert kill_switch["fired"] == 1
    assert await effects(engine.runtime) == []  # neither the effects ...
    assert {r.current_node for r in await runs_of(engine.runtime, funnel_id)} == {
        "one"
    }  # ... nor the advance
    await engine.drive()
    assert engine.sink.messages == []  # the runs are still leased by the dead worker
    await engine.advance(seconds=61)  # lease expired
    counts = engine.sink.count_by_message_id()
    assert len(counts) == 10
    assert set(counts.values()) == {1}
    assert await count(engine.runtime, Run, Run.status == RUN_COMPLETED) == 5
