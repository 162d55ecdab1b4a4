"""Each flow node's behaviour on a ManualClock (FN-14 to FN-20), runs (FN-2, FN-3, FN-6) and the
runner's lease recovery (FN-5, FN-9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.contacts.memberships import add_tag
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions.graph import Split, SplitBranch
from app.engines.funnels.models import (
    OUTBOX_CANCELLED,
    OUTBOX_PENDING,
    OUTBOX_SENT,
    RUN_ACTIVE,
    RUN_COMPLETED,
    Contact,
    Run,
)
from app.engines.funnels.runs.claim.lease import lease_runs
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.work.nodes.flow import split_choice
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    count,
    effects,
    email_node,
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


# -- runs --------------------------------------------------------------------------------------


async def test_fn2_run_is_pinned_and_due_at_once(engine: Engine, space: Space) -> None:
    """FN-2/FN-4: a run holds its version, current node, wake_at = now and its own context."""
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime, ws, graph(node("wait", "w", days=1, next="e"), email_node("e"))
    )
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        run_id = await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    [run] = await runs_of(engine.runtime, funnel_id)
    assert (run.id, run.version_id, run.current_node) == (run_id, version.id, "w")
    assert run.wake_at == engine.clock.now()
    assert run.context == {}
    result = await engine.runner.run_batch(owner="w1", now=engine.clock.now())
    assert result.executed == 1  # due on the very tick that created it


async def test_fn3_one_run_per_contact_per_funnel_by_index(engine: Engine, space: Space) -> None:
    """FN-3: a second entry is refused by the unique index, also when inserted behind the
    service's back."""
    ws = space.workspace_id
    funnel_id, version = await published(engine.runtime, ws, graph(node("wait", "w", days=9)))
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        first = await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
        second = await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    assert first is not None
    assert second is None
    # Even a run that ended blocks a new one in a funnel closed to re-entry.
    async with engine.runtime.db.write() as uow:
        await uow.session.execute(update(Run).values(status=RUN_COMPLETED, wake_at=None))
    async with engine.runtime.db.write() as uow:
        assert (
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
            is None
        )
    with pytest.raises(IntegrityError):
        async with engine.runtime.db.write() as uow:
            uow.session.add(
                Run(
                    workspace_id=ws,
                    funnel_id=funnel_id,
                    version_id=version.id,
                    contact_id=cid,
                    reentry=False,
                    status=RUN_ACTIVE,
                    current_node="w",
                    context={},
                    step_count=0,
                    failures=0,
                    entered_at=engine.clock.now(),
                    updated_at=engine.clock.now(),
                )
            )


async def test_fn3_reentry_funnel_allows_one_active_run(engine: Engine, space: Space) -> None:
    """FN-3 with re-entry: one *active* run at a time (partial unique index); a new one only
    after the previous ended."""
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(node("wait", "w", hours=1), settings={"reentry": True}),
    )
    cid = await contact(engine.runtime, ws, "a@x.test")
    now = engine.clock.now()
    async with engine.runtime.db.write() as uow:
        assert await enter(uow.session, version=version, contact_id=cid, now=now)
        assert await enter(uow.session, version=version, contact_id=cid, now=now) is None
    await engine.drive()
    await engine.advance(hours=1)
    [done] = await runs_of(engine.runtime, funnel_id)
    assert done.status == RUN_COMPLETED
    async with engine.runtime.db.write() as uow:
        assert await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    runs = await runs_of(engine.runtime, funnel_id)
    assert [r.status for r in runs] == [RUN_COMPLETED, RUN_ACTIVE]
    with pytest.raises(IntegrityError):
        async with engine.runtime.db.write() as uow:
            await uow.session.execute(
                update(Run).where(Run.id == runs[0].id).values(status=RUN_ACTIVE)
            )


async def test_fn6_each_node_writes_a_step(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, tags=["vip"], fields={"plan": "text"})
    funnel_id, _ = await published(
        engine.runtime,
        ws,
        graph(
            node("add_tag", "t", tag="vip", next="f"),
            node("set_field", "f", field="plan", value="gold", next="e"),
            email_node("e"),
            triggers=[{"kind": "contact_created"}],
        ),
    )
    await contact(engine.runtime, ws, "a@x.test")
    await engine.drive()
    [run] = await runs_of(engine.runtime, funnel_id)
    steps = await steps_of(engine.runtime, run.id)
    assert [(s.seq, s.node_id, s.kind) for s in steps] == [
        (1, "t", "add_tag"),
        (2, "f", "set_field"),
        (3, "e", "send_email"),
    ]
    assert steps[1].output == {"field": "plan", "before": None, "after": "gold"}
    assert steps[2].output["message_id"].startswith(f"<run-{run.id}-step-3")
    assert run.status == RUN_COMPLETED


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
    async with engine.runtime.db.write() as uow:
        for i in range(40):
            c = Contact(
                workspace_id=ws,
                email=f"c{i}@x.test",
                created_at=engine.clock.now(),
                updated_at=engine.clock.now(),
            )
            c.fields, c.consent, c.suppressed = {}, {}, {}
            uow.session.add(c)
            await uow.session.flush()
            await enter(uow.session, version=version, contact_id=c.id, now=engine.clock.now())
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
    async with engine.runtime.db.write() as uow:
        for i in range(5):
            c = Contact(
                workspace_id=ws,
                email=f"c{i}@x.test",
                created_at=engine.clock.now(),
                updated_at=engine.clock.now(),
            )
            c.fields, c.consent, c.suppressed = {}, {}, {}
            uow.session.add(c)
            await uow.session.flush()
            await enter(uow.session, version=version, contact_id=c.id, now=engine.clock.now())
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


# -- leases (FN-5, FN-9) -----------------------------------------------------------------------


async def test_fn9_lease_expiry_recovery_without_repeating_a_committed_effect(
    engine: Engine, space: Space
) -> None:
    ws = space.workspace_id
    _funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            email_node("one", subject="one", next="w"),
            node("wait", "w", days=1, next="two"),
            email_node("two", subject="two"),
        ),
    )
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    await engine.drive()
    await engine.advance(days=1, seconds=-1)
    engine.clock.advance(seconds=1)
    # Worker A leases the due run, then dies without executing it.
    leased = await lease_runs(
        engine.runtime.db, owner="A", now=engine.clock.now(), limit=10, lease_seconds=60
    )
    assert len(leased) == 1
    # Nobody else may run it while the lease holds.
    assert (await engine.runner.run_batch(owner="B", now=engine.clock.now())).leased == 0
    engine.clock.advance(seconds=61)
    result = await engine.runner.run_batch(owner="B", now=engine.clock.now())
    assert result.executed == 1
    # A wakes up late: its lease is gone, it writes nothing.
    late = await engine.runner.execute(leased, owner="A", now=engine.clock.now())
    assert late.fenced == 1
    assert late.steps == 0
    await engine.drive()
    assert sorted(await _subjects(engine)) == ["one", "two"]
    assert await count(engine.runtime, Run, Run.status == RUN_COMPLETED) == 1
    assert len(await effects(engine.runtime, status=OUTBOX_SENT)) == 2


async def test_fn5_two_workers_never_lease_the_same_run(engine: Engine, space: Space) -> None:
    import asyncio

    ws = space.workspace_id
    _, version = await published(engine.runtime, ws, graph(node("wait", "w", days=1)))
    async with engine.runtime.db.write() as uow:
        for i in range(60):
            c = Contact(
                workspace_id=ws,
                email=f"c{i}@x.test",
                created_at=engine.clock.now(),
                updated_at=engine.clock.now(),
            )
            c.fields, c.consent, c.suppressed = {}, {}, {}
            uow.session.add(c)
            await uow.session.flush()
            await enter(uow.session, version=version, contact_id=c.id, now=engine.clock.now())
    batches = await asyncio.gather(
        *(
            lease_runs(
                engine.runtime.db, owner=f"w{i}", now=engine.clock.now(), limit=7, lease_seconds=60
            )
            for i in range(12)
        )
    )
    leased = [rid for b in batches for rid in b]
    assert len(leased) == 60
    assert len(set(leased)) == 60


async def test_a_failing_run_rolls_back_alone_and_retries_with_backoff(
    engine: Engine, space: Space
) -> None:
    """FN-7 per run: one run whose node fails does not hold back the batch; its own writes roll
    back (savepoint), the others commit, and it is retried later."""
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, tags=["seen"])
    funnel_id, version = await published(
        engine.runtime, ws, graph(node("add_tag", "t", tag="seen", next="e"), email_node("e"))
    )
    ids = [await contact(engine.runtime, ws, f"c{i}@x.test") for i in range(3)]
    async with engine.runtime.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
        # The middle run points at a node its version does not have: executing it fails.
        await uow.session.execute(
            update(Run).where(Run.contact_id == ids[1]).values(current_node="ghost")
        )
    result = await engine.runner.run_batch(owner="w", now=engine.clock.now())
    assert (result.executed, result.failed) == (3, 1)
    runs = {r.contact_id: r for r in await runs_of(engine.runtime, funnel_id)}
    assert runs[ids[0]].status == RUN_COMPLETED
    assert runs[ids[2]].status == RUN_COMPLETED
    broken = runs[ids[1]]
    assert (broken.status, broken.failures, broken.current_node) == (RUN_ACTIVE, 1, "ghost")
    assert broken.wake_at == engine.clock.now() + timedelta(seconds=30)
    assert "ghost" in (broken.last_error or "")
    assert len(await effects(engine.runtime)) == 2


async def test_jobs_drain_due_runs_and_hand_effects_to_the_deliverer(
    engine: Engine, space: Space
) -> None:
    """The runner as it runs inside serve and worker: the 10-second sweep enqueues runner and
    deliverer jobs keyed by the tick; a runner job drains what is due."""
    from app.engines.funnels import jobs
    from app.scheduling.models import Job

    ws = space.workspace_id
    _, version = await published(engine.runtime, ws, graph(email_node("e")))
    cid = await contact(engine.runtime, ws, "a@x.test")
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    ctx = engine.runtime.context(job_id="test")
    await jobs.tick(ctx, engine.clock.now())
    await jobs.tick(ctx, engine.clock.now())  # the same tick again enqueues nothing new
    if engine.runtime.queue.backend == "database":
        names = [j.name for j in await _jobs(engine, Job)]
        expected = (
            2
            + engine.runtime.settings.funnels.runner_tasks
            + engine.runtime.settings.funnels.deliver_tasks
        )
        assert len(names) == expected
    await jobs.advance(ctx, jobs.Shard())
    assert len(await effects(engine.runtime)) == 1


async def _jobs(engine: Engine, model: type) -> list:
    from sqlalchemy import select

    async with engine.runtime.db.read() as s:
        return list(await s.scalars(select(model)))
