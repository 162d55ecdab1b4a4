"""FN-3 with ``settings.reentry_days`` against concurrent writers on PostgreSQL: a run that
started and ended while another writer was entering the same contact (its read of the contact's
history saw nothing yet, and the active-run index no longer stands in its way) is refused by the
entry gate; and two concurrent matchers, with a runner ending runs under them, start one run per
contact."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text, update

from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import RUN_COMPLETED, Run
from app.engines.funnels.runs.due.entry import enter
from app.runtime import Runtime
from tests.conftest import eventually
from tests.engines.funnels.factories import (
    Engine,
    Space,
    bulk_contacts,
    contact,
    published,
    runs_of,
    setup_names,
)
from tests.engines.funnels.runs.test_reentry_days import WEEKLY, ping, runs_per_contact, tagging

pytestmark = pytest.mark.postgres


async def _a_writer_waits_on_a_lock(runtime: Runtime) -> bool:
    """Whether another session of this database waits for a lock (the second writer's insert
    waiting for the first writer's transaction)."""
    async with runtime.db.read() as s:
        waiting = await s.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
    return bool(waiting)


async def test_fn3_the_gate_refuses_an_entry_that_started_and_ended_concurrently(
    engine: Engine, space: Space
) -> None:
    rt, ws = engine.runtime, space.workspace_id
    await setup_names(rt, ws, tags=["in"])
    funnel_id, version = await published(rt, ws, tagging(WEEKLY))
    ann = await contact(rt, ws, "ann@x.test")
    now = rt.clock.now()
    entered = asyncio.Event()

    async def first() -> int | None:
        async with rt.db.write() as uow:
            run_id = await enter(uow.session, version=version, contact_id=ann, now=now)
            # The run ends at once, as a one-step run does on a fast worker.
            await uow.session.execute(
                update(Run).where(Run.id == run_id).values(status=RUN_COMPLETED, ended_at=now)
            )
            entered.set()
            await eventually(lambda: _a_writer_waits_on_a_lock(rt), interval=0.005)
        return run_id

    async def second() -> int | None:
        await entered.wait()
        async with rt.db.write() as uow:
            return await enter(uow.session, version=version, contact_id=ann, now=now)

    first_run, second_run = await asyncio.gather(first(), second())
    assert first_run is not None
    assert second_run is None
    assert [r.id for r in await runs_of(rt, funnel_id)] == [first_run]


async def test_fn3_two_concurrent_matchers_and_a_runner_start_one_run_per_contact(
    engine: Engine, space: Space
) -> None:
    rt, ws = engine.runtime, space.workspace_id
    await setup_names(rt, ws, tags=["in"])
    funnel_id, _ = await published(rt, ws, tagging(WEEKLY))
    people = await bulk_contacts(rt, ws, 200)
    for round_ in range(8):
        await ping(rt, ws, people, f"round{round_}")
    matched = asyncio.Event()

    async def matcher() -> int:
        started = 0
        while True:
            events, n = await match_events(
                rt.db, now=rt.clock.now(), limit=40, segments=evaluate_segments
            )
            started += n
            if events == 0:
                return started

    async def runner() -> None:
        # Ends the runs while the matchers still enter contacts (the active-run index alone
        # would then let a second run in).
        while not matched.is_set():
            await engine.runner.run_batch(owner="runner", now=rt.clock.now())

    running = asyncio.create_task(runner())
    started = await asyncio.gather(matcher(), matcher())
    matched.set()
    await running
    assert sum(started) == 200
    assert await runs_per_contact(rt, funnel_id) == dict.fromkeys(people, 1)
