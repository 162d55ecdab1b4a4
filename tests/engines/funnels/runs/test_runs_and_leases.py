"""Runs and the runner: a run is pinned and due at once (FN-2, FN-4), one per contact (FN-3), a
step per node (FN-6); the runner's lease and its recovery (FN-5, FN-9), a failing run on its own,
and the jobs that drain due runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from app import event_loop
from app.engines.funnels.models import (
    OUTBOX_SENT,
    RUN_ACTIVE,
    RUN_COMPLETED,
    Run,
)
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.claim.lease import lease_runs
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.work.batch_writes import write_batch
from app.engines.funnels.runs.work.runner import Runner
from app.settings import FunnelSettings
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
    runs_of,
    setup_names,
    steps_of,
)
from tests.other_task import OtherTask

VIP = {"kind": "field", "field": "first_name", "op": "eq", "value": "VIP"}

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


async def test_fn7_an_effect_written_again_is_skipped_and_reads_back_as_written(
    engine: Engine, space: Space
) -> None:
    """FN-7: the batch's outbox rows (one JSON document of rows on PostgreSQL) read back as the
    runner wrote them, and a row whose idempotency key is already stored is skipped, neither
    an error nor a second row."""
    ws = space.workspace_id
    await setup_names(engine.runtime, ws)
    await published(
        engine.runtime, ws, graph(email_node("e"), triggers=[{"kind": "contact_created"}])
    )
    await contact(engine.runtime, ws, "a@x.test")
    await engine.drive()
    [stored] = await effects(engine.runtime)
    assert stored.payload["subject"]
    again = {
        column: getattr(stored, column)
        for column in (
            "workspace_id",
            "run_id",
            "contact_id",
            "node_id",
            "channel",
            "idempotency_key",
            "payload",
            "next_attempt_at",
        )
    }
    async with engine.runtime.db.write() as uow:
        await write_batch(
            uow.session, [], [{**again, "payload": {"changed": True}}], [], engine.clock.now()
        )
    [kept] = await effects(engine.runtime)
    assert (kept.id, kept.payload) == (stored.id, stored.payload)


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
    assert sorted(m.subject for m in engine.sink.messages) == ["one", "two"]
    assert await count(engine.runtime, Run, Run.status == RUN_COMPLETED) == 1
    assert len(await effects(engine.runtime, status=OUTBOX_SENT)) == 2


async def test_fn5_two_workers_never_lease_the_same_run(engine: Engine, space: Space) -> None:
    import asyncio

    ws = space.workspace_id
    _, version = await published(engine.runtime, ws, graph(node("wait", "w", days=1)))
    await entered_contacts(engine.runtime, ws, version, 60, prefix="c")
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


async def test_a_run_failing_midway_is_written_back_as_it_was_before_the_wake(
    engine: Engine, space: Space
) -> None:
    """FN-7 per run: a run that fails after it has moved on (a mail emitted, a choice stored, a
    node passed) is retried from where it was, with its context as it was, nothing emitted."""
    ws = space.workspace_id
    funnel_id, version = await published(
        engine.runtime,
        ws,
        graph(
            node(
                "split",
                "s",
                branches=[
                    {"name": "A", "weight": 1, "next": "e"},
                    {"name": "B", "weight": 1, "next": "e"},
                ],
            ),
            email_node("e", next="j"),
            node("join", "j", next="end"),
            email_node("end"),
        ),
    )
    ids = [await contact(engine.runtime, ws, f"c{i}@x.test") for i in range(2)]
    async with engine.runtime.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())

    async def breaks_for_the_first(ctx: Any, node: Any) -> Any:
        if ctx.run.contact_id == ids[0]:
            raise RuntimeError("join broke")
        return await EXECUTORS["join"](ctx, node)

    runner = Runner(
        engine.runtime.db,
        FunnelSettings(),
        mail_domain="x.test",
        executors={**EXECUTORS, "join": breaks_for_the_first},
    )
    result = await runner.run_batch(owner="w", now=engine.clock.now())
    assert (result.executed, result.failed) == (2, 1)
    runs = {r.contact_id: r for r in await runs_of(engine.runtime, funnel_id)}
    broken = runs[ids[0]]
    assert (broken.status, broken.current_node, broken.step_count) == (RUN_ACTIVE, "s", 0)
    assert (broken.context, broken.failures) == ({}, 1)
    assert runs[ids[1]].status == RUN_COMPLETED
    assert {e.contact_id for e in await effects(engine.runtime)} == {ids[1]}


async def test_a_batch_gives_the_loops_other_tasks_their_turn_between_runs(
    engine: Engine, space: Space, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch is many runs of Python with no wait in between: the process's SMTP exchanges and
    HTTP answers on the same loop get their turn while it runs (app.event_loop.Turns)."""
    monkeypatch.setattr(event_loop, "TURN_SECONDS", 0)
    ws = space.workspace_id
    _, version = await published(
        engine.runtime,
        ws,
        graph(node("condition", "c", predicate=VIP, yes="e", no="e"), email_node("e")),
    )
    ids = [await contact(engine.runtime, ws, f"c{i}@x.test") for i in range(3)]
    async with engine.runtime.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=engine.clock.now())
    seen: list[int] = []

    async def noting_the_other_task(ctx: Any, node: Any) -> Any:
        seen.append(other.turns)
        return await EXECUTORS["condition"](ctx, node)

    runner = Runner(
        engine.runtime.db,
        FunnelSettings(),
        mail_domain="x.test",
        executors={**EXECUTORS, "condition": noting_the_other_task},
    )
    async with OtherTask() as other:
        result = await runner.run_batch(owner="w", now=engine.clock.now())
    assert result.executed == 3
    assert len(seen) == 3
    assert seen == sorted(set(seen))  # it ran before each of the runs


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
