"""Each flow node's behaviour on a ManualClock (FN-14 to FN-20); runs themselves and the runner's
lease are in ``test_runs_and_leases.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.contacts.memberships import add_tag
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions.graph import Split, SplitBranch
from app.engines.funnels.models import (
    OUTBOX_CANCELLED,
    OUTBOX_PENDING,
    RUN_ACTIVE,
    RUN_COMPLETED,
)
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.work.nodes.flow import split_choice
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    effects,
    email_node,
    entered_contacts,
    graph,
    node,
    published,
    runs_of,
    setup_names,
    steps_of,
)

UTC_ = UTC


async def _tag(engine: Engine, ws: int, contact_id: int, tag: str) -> None:
    async with engine.runtime.db.write() as uow:
        c = await get_contact(uow.session, ws, contact_id)
        await add_tag(uow.session, c, tag, engine.clock.now())


async def _subjects(engine: Engine) -> list[str]:
    return [m.subject for m in engine.sink.messages]


# -- wait (FN-14) ------------------------------------------------------------------------------


async def _one_wait(engine: Engine, ws: int, wait: dict, tz: str, **contact_kw: object) -> int:
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(node("wait", "w", **wait, next="e"), email_node("e", subject="after")),
    )
    cid = await contact(engine.runtime, ws, "a@x.test", timezone=tz, **contact_kw)
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    return funnel_id


async def _wake(engine: Engine, funnel_id: int) -> datetime:
    [run] = await runs_of(engine.runtime, funnel_id)
    assert run.wake_at is not None
    return run.wake_at


async def test_fn14_wait_duration(engine: Engine, space: Space) -> None:
    funnel_id = await _one_wait(engine, space.workspace_id, {"hours": 5, "minutes": 30}, "UTC")
    assert await _wake(engine, funnel_id) == engine.clock.now() + timedelta(hours=5, minutes=30)
    await engine.advance(hours=5, minutes=29)
    assert await _subjects(engine) == []
    await engine.advance(minutes=1)
    assert await _subjects(engine) == ["after"]


async def test_fn14_wait_until_absolute_time(engine: Engine, space: Space) -> None:
    until = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    funnel_id = await _one_wait(engine, space.workspace_id, {"until": until.isoformat()}, "UTC")
    assert await _wake(engine, funnel_id) == until


async def test_fn14_weekday_and_hour_across_new_york_dst(engine: Engine, space: Space) -> None:
    """Thursday 5 March 2026 (EST) → next Monday 09:00 is 9 March, after the change to EDT:
    13:00 UTC, not 14:00."""
    engine.clock.set(datetime(2026, 3, 5, 15, 0, tzinfo=UTC))
    funnel_id = await _one_wait(
        engine, space.workspace_id, {"weekday": 0, "hour": 9}, "America/New_York"
    )
    assert await _wake(engine, funnel_id) == datetime(2026, 3, 9, 13, 0, tzinfo=UTC)


async def test_fn14_date_field_offset_across_berlin_dst(engine: Engine, space: Space) -> None:
    """Renewal 2 April 2026, three days before at 09:00 Berlin: 30 March, already CEST → 07:00 UTC
    (it would be 08:00 UTC in winter time)."""
    await setup_names(engine.runtime, space.workspace_id, fields={"renewal": "date"})
    engine.clock.set(datetime(2026, 3, 20, 10, 0, tzinfo=UTC))
    funnel_id = await _one_wait(
        engine,
        space.workspace_id,
        {"field": "renewal", "offset_days": -3, "hour": 9},
        "Europe/Berlin",
        fields={"renewal": "2026-04-02"},
    )
    assert await _wake(engine, funnel_id) == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)


async def test_fn14_date_field_empty_does_not_wait(engine: Engine, space: Space) -> None:
    await setup_names(engine.runtime, space.workspace_id, fields={"renewal": "date"})
    await _one_wait(engine, space.workspace_id, {"field": "renewal", "hour": 9}, "UTC")
    assert await _subjects(engine) == ["after"]


async def test_fn14_fn11_wait_ends_early_on_event(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    _funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node("wait", "w", days=7, until_event="purchase", event_next="thanks", next="nudge"),
            email_node("nudge", subject="nudge"),
            email_node("thanks", subject="thanks"),
        ),
    )
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    await engine.advance(days=1)
    async with engine.runtime.db.write() as uow:
        await record_event(
            uow.session,
            workspace_id=ws,
            contact_id=cid,
            name="purchase",
            source="api",
            now=engine.clock.now(),
        )
    await engine.drive()
    assert await _subjects(engine) == ["thanks"]
    await engine.advance(days=7)
    assert await _subjects(engine) == ["thanks"]


# -- condition, split, join (FN-15 to FN-17) ---------------------------------------------------


async def test_fn15_condition_takes_yes_or_no(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, tags=["vip"])
    _funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node("condition", "c", predicate={"kind": "has_tag", "tag": "vip"}, yes="y", no="n"),
            email_node("y", subject="vip"),
            email_node("n", subject="regular"),
        ),
    )
    vip = await contact(engine.runtime, ws, "vip@x.test", tags=["vip"])
    other = await contact(engine.runtime, ws, "other@x.test")
    async with engine.runtime.db.write() as uow:
        for cid in (vip, other):
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    got = {tuple(m.to): m.subject for m in engine.sink.messages}
    assert got == {("vip@x.test",): "vip", ("other@x.test",): "regular"}


async def test_fn16_split_choice_is_weighted_stored_and_deterministic(
    engine: Engine, space: Space
) -> None:
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node(
                "split",
                "s",
                branches=[
                    {"name": "A", "weight": 3, "next": "a"},
                    {"name": "B", "weight": 1, "next": "b"},
                ],
            ),
            node("wait", "a", days=1),
            node("wait", "b", days=1),
        ),
    )
    await entered_contacts(engine.runtime, ws, version, 40, prefix="c")
    await engine.drive()
    runs = await runs_of(engine.runtime, funnel_id)
    chosen = [r.context["splits"]["s"] for r in runs]
    assert set(chosen) == {"A", "B"}
    assert chosen.count("A") > chosen.count("B")
    split = Split(
        id="s",
        branches=[
            SplitBranch(name="A", weight=3, next="a"),
            SplitBranch(name="B", weight=1, next="b"),
        ],
    )
    for run in runs:
        assert split_choice(run.id, split) == run.context["splits"]["s"]
        assert run.current_node == ("a" if run.context["splits"]["s"] == "A" else "b")


async def test_fn17_join_brings_branches_together(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, tags=["vip"])
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node("condition", "c", predicate={"kind": "has_tag", "tag": "vip"}, yes="y", no="n"),
            node("add_tag", "y", tag="vip", next="j"),
            node("remove_tag", "n", tag="vip", next="j"),
            node("join", "j", next="e"),
            email_node("e", subject="together"),
        ),
    )
    for i, tags in enumerate((["vip"], [])):
        cid = await contact(engine.runtime, ws, f"c{i}@x.test", tags=tags)
        async with engine.runtime.db.write() as uow:
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    assert await _subjects(engine) == ["together", "together"]
    for run in await runs_of(engine.runtime, funnel_id):
        assert run.context["joins"] == {"j": 1}


# -- goal (FN-18) ------------------------------------------------------------------------------


async def test_fn18_goal_watcher_moves_the_contact_and_cancels_the_rest(
    engine: Engine, space: Space
) -> None:
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, tags=["customer"])
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            email_node("hello", subject="hello", next="w"),
            node("wait", "w", days=3, next="miss"),
            email_node("miss", subject="we miss you", next="g"),
            node("goal", "g", predicate={"kind": "has_tag", "tag": "customer"}),
            triggers=[{"kind": "contact_created"}],
        ),
    )
    back = await contact(engine.runtime, ws, "back@x.test")
    away = await contact(engine.runtime, ws, "away@x.test")
    await engine.drive()
    await engine.advance(days=1)
    await _tag(engine, ws, back, "customer")
    await engine.drive()
    runs = {r.contact_id: r for r in await runs_of(engine.runtime, funnel_id)}
    assert runs[back].status == RUN_COMPLETED
    assert runs[back].exit_reason == "goal:g"
    assert runs[away].status == RUN_ACTIVE
    await engine.advance(days=3)
    received = [(m.to[0], m.subject) for m in engine.sink.messages]
    assert ("back@x.test", "we miss you") not in received
    assert ("away@x.test", "we miss you") in received
    del version


async def test_fn18_goal_met_at_wake_cancels_pending_messages(engine: Engine, space: Space) -> None:
    """A message held by quiet hours is cancelled when the goal is met before it goes out."""
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, tags=["customer"])
    _funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node("quiet_hours", "q", start_hour=0, end_hour=12, next="offer"),
            email_node("offer", subject="offer", next="w"),
            node("wait", "w", days=1, next="g"),
            node("goal", "g", predicate={"kind": "has_tag", "tag": "customer"}),
        ),
    )
    cid = await contact(engine.runtime, ws, "a@x.test")  # UTC contact, 09:00: quiet until 12:00
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    [pending] = await effects(engine.runtime)
    assert pending.status == OUTBOX_PENDING
    await _tag(engine, ws, cid, "customer")
    await engine.drive()
    [cancelled] = await effects(engine.runtime)
    assert cancelled.status == OUTBOX_CANCELLED
    await engine.advance(hours=4)
    assert engine.sink.messages == []


# -- throttle and quiet hours (FN-19, FN-20) ---------------------------------------------------


async def test_fn19_throttle_paces_a_burst(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(node("throttle", "t", limit=2, period_seconds=3600, next="e"), email_node("e")),
    )
    await entered_contacts(engine.runtime, ws, version, 5, prefix="c")
    await engine.drive()
    assert len(engine.sink.messages) == 2
    await engine.advance(minutes=59)
    assert len(engine.sink.messages) == 2
    await engine.advance(minutes=1)
    assert len(engine.sink.messages) == 4
    await engine.advance(hours=1)
    assert len(engine.sink.messages) == 5
    held = [
        s
        for r in await runs_of(engine.runtime, funnel_id)
        for s in await steps_of(engine.runtime, r.id)
        if s.decision.startswith("held")
    ]
    assert held


async def test_fn20_quiet_hours_hold_until_the_contacts_morning(
    engine: Engine, space: Space
) -> None:
    """09:00 UTC is 04:00 in New York: held until 08:00 EST = 13:00 UTC."""
    ws = space.workspace_id
    _funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node("quiet_hours", "q", start_hour=21, end_hour=8, next="e"),
            email_node("e", subject="morning"),
        ),
    )
    cid = await contact(engine.runtime, ws, "ny@x.test", timezone="America/New_York")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    [effect] = await effects(engine.runtime)
    assert effect.next_attempt_at == datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
    await engine.advance(hours=3, minutes=59)
    assert engine.sink.messages == []
    await engine.advance(minutes=1)
    assert await _subjects(engine) == ["morning"]


async def test_fn20_funnel_setting_applies_to_every_send(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    _, version = await published(
        engine.runtime,
        ws,
        graph(email_node("e", subject="x"), settings={"quiet_start_hour": 0, "quiet_end_hour": 10}),
    )
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    assert engine.sink.messages == []
    await engine.advance(hours=1)
    assert await _subjects(engine) == ["x"]
