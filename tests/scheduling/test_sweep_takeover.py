"""Sweeps survive their runner (issue 11 items 2 and 3), on a ManualClock: a tick held by a dead
process is taken over when its short lease expires (the next 10-second tick, and a missed hourly
tick once), a process restarted after a stop runs the tick it missed, an exception while finishing
a tick is logged and the next tick runs, a runner that lost its claim stops its tick, and a sweep
that cannot complete a tick makes ``/ready`` answer 503 naming it."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text, update

from app.clock import ManualClock
from app.db.dialect import is_postgres
from app.db.session import Database
from app.runtime import Runtime
from app.scheduling.jobs import JobContext
from app.scheduling.models import SweeperState
from app.scheduling.sweeper import EVERY_10_SECONDS, HOURLY_AT_20, Sweep, SweepRunner
from app.scheduling.ticks import claim_tick, sweeper_states
from app.web.ops import sweeper_overview
from tests.conftest import eventually, metrics_auth
from tests.scheduling.conftest import Runtimes

LEASE = 15


def at(clock_text: str) -> datetime:
    return datetime.fromisoformat(clock_text).replace(tzinfo=UTC)


def runner(runtime: Runtime, sweeps: list[Sweep], owner: str = "survivor") -> SweepRunner:
    return SweepRunner(
        runtime.db, runtime.clock, sweeps, runtime.context, owner=owner, lease_seconds=LEASE
    )


async def settle(clock: ManualClock, sweeper: SweepRunner, loops: int = 1) -> None:
    async def asleep() -> bool:
        return clock.sleepers == loops and not sweeper.running

    await eventually(asleep)


class Recorder:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.ticks: list[tuple[datetime, datetime]] = []
        """(nominal tick, when it started)."""

    async def __call__(self, ctx: JobContext, tick: datetime) -> None:
        assert ctx.tick == tick, "the nominal tick time is on the job context too"
        self.ticks.append((tick, self.clock.now()))


async def drive(clock: ManualClock, sweeper: SweepRunner, until: datetime, step: float) -> None:
    while clock.now() < until:
        clock.advance(step)
        await settle(clock, sweeper)


async def state(db: Database, name: str) -> SweeperState:
    (row,) = [s for s in await sweeper_states(db) if s.name == name]
    return row


async def test_a_tick_held_by_a_dead_process_is_taken_over_at_the_next_tick_within_one_lease(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    name = f"test.takeover.{uuid.uuid4().hex[:6]}"
    # A process claimed the 09:00:10 tick and was SIGKILLed half a second into it.
    killed_at = at("2026-03-02 09:00:10.5")
    assert await claim_tick(runtime.db, name, at("2026-03-02 09:00:10"), "dead", killed_at, LEASE)
    manual.set(at("2026-03-02 09:00:11"))
    recorder = Recorder(manual)
    sweeper = runner(runtime, [Sweep(name, EVERY_10_SECONDS, recorder)])
    task = asyncio.create_task(sweeper.run())
    try:
        await settle(manual, sweeper)
        await drive(manual, sweeper, at("2026-03-02 09:00:45"), 0.5)
    finally:
        sweeper.stop()
        await asyncio.gather(task, return_exceptions=True)
    ticks = [t for t, _ in recorder.ticks]
    assert ticks == [
        at("2026-03-02 09:00:20"),
        at("2026-03-02 09:00:30"),
        at("2026-03-02 09:00:40"),
    ]
    first_start = recorder.ticks[0][1]
    assert first_start - killed_at <= timedelta(seconds=LEASE + 1), "taken over within a lease"
    assert at("2026-03-02 09:00:10") not in ticks, "the killed 10-second tick is not run twice"


async def test_a_missed_hourly_tick_is_run_once_by_the_survivor(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    name = f"test.hourly_takeover.{uuid.uuid4().hex[:6]}"
    tick = at("2026-03-02 09:20:00")
    assert await claim_tick(runtime.db, name, tick, "dead", at("2026-03-02 09:20:01"), LEASE)
    manual.set(at("2026-03-02 09:20:05"))
    recorder = Recorder(manual)
    sweeper = runner(runtime, [Sweep(name, HOURLY_AT_20, recorder)])
    task = asyncio.create_task(sweeper.run())
    try:
        await settle(manual, sweeper)
        await drive(manual, sweeper, at("2026-03-02 09:22:00"), 1)
        await drive(manual, sweeper, at("2026-03-02 10:21:00"), 600)
    finally:
        sweeper.stop()
        await asyncio.gather(task, return_exceptions=True)
    assert [t for t, _ in recorder.ticks] == [tick, at("2026-03-02 10:20:00")]
    assert recorder.ticks[0][1] <= at("2026-03-02 09:20:17"), "right after the dead lease"
    row = await state(runtime.db, name)
    assert (row.finished_tick_at, row.ticks) == (at("2026-03-02 10:20:00"), 2)


async def test_a_process_started_after_a_stop_runs_the_tick_it_missed_once(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    missed, new = f"test.missed.{uuid.uuid4().hex[:6]}", f"test.new.{uuid.uuid4().hex[:6]}"
    # The hourly sweep last ran at 08:20; every process was down at 09:20.
    earlier = at("2026-03-02 08:20:00")
    assert await claim_tick(runtime.db, missed, earlier, "old", earlier, LEASE)
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(SweeperState)
            .where(SweeperState.name == missed)
            .values(lease_until=None, finished_tick_at=earlier, last_succeeded_at=earlier)
        )
    manual.set(at("2026-03-02 09:30:00"))
    ran_missed, ran_new = Recorder(manual), Recorder(manual)
    sweeps = [Sweep(missed, HOURLY_AT_20, ran_missed), Sweep(new, HOURLY_AT_20, ran_new)]
    sweeper = runner(runtime, sweeps)
    task = asyncio.create_task(sweeper.run())
    try:
        await settle(manual, sweeper, loops=2)
        manual.advance(60)
        await settle(manual, sweeper, loops=2)
    finally:
        sweeper.stop()
        await asyncio.gather(task, return_exceptions=True)
    assert [t for t, _ in ran_missed.ticks] == [at("2026-03-02 09:20:00")]
    assert ran_new.ticks == [], "a sweep that never ticked starts at its next tick"


@pytest.fixture
async def failing_finish(shared_db: Database) -> AsyncIterator[str]:
    """A database trigger that makes recording the end of one sweep's tick fail (a real error
    from the database, as a lock episode would raise)."""
    name = f"test.finish_fails.{uuid.uuid4().hex[:6]}"
    async with shared_db.write() as uow:
        if is_postgres(shared_db):
            await uow.session.execute(
                text(
                    "CREATE FUNCTION sweep_finish_fails() RETURNS trigger AS $$ BEGIN "
                    f"IF NEW.name = '{name}' AND NEW.finished_tick_at IS DISTINCT FROM "
                    "OLD.finished_tick_at THEN RAISE EXCEPTION 'injected: disk I/O error'; "
                    "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
                )
            )
            await uow.session.execute(
                text(
                    "CREATE TRIGGER sweep_finish_fails BEFORE UPDATE ON sweeper_state "
                    "FOR EACH ROW EXECUTE FUNCTION sweep_finish_fails()"
                )
            )
        else:
            await uow.session.execute(
                text(
                    "CREATE TRIGGER sweep_finish_fails BEFORE UPDATE OF finished_tick_at "
                    f"ON sweeper_state WHEN NEW.name = '{name}' "
                    "BEGIN SELECT RAISE(ABORT, 'injected: disk I/O error'); END"
                )
            )
    yield name
    await drop_finish_trigger(shared_db)


async def drop_finish_trigger(db: Database) -> None:
    async with db.write() as uow:
        if is_postgres(db):
            await uow.session.execute(
                text("DROP TRIGGER IF EXISTS sweep_finish_fails ON sweeper_state")
            )
            await uow.session.execute(text("DROP FUNCTION IF EXISTS sweep_finish_fails()"))
        else:
            await uow.session.execute(text("DROP TRIGGER IF EXISTS sweep_finish_fails"))


async def test_an_exception_while_finishing_a_tick_is_logged_and_the_next_tick_runs(
    runtimes: Runtimes, manual: ManualClock, failing_finish: str, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = runtimes.make("database", manual)
    name = failing_finish
    recorder = Recorder(manual)
    sweeper = runner(runtime, [Sweep(name, EVERY_10_SECONDS, recorder)])
    before = REGISTRY.get_sample_value("sweepline_sweep_loop_errors_total", {"sweep": name}) or 0
    task = asyncio.create_task(sweeper.run())
    try:
        await settle(manual, sweeper)
        with caplog.at_level(logging.ERROR, logger="app.scheduling.sweeper"):
            manual.advance(10)  # 09:00:10 runs; recording its end fails
            await settle(manual, sweeper)
        await drop_finish_trigger(runtime.db)  # the database recovers
        manual.advance(10)  # 09:00:20
        await settle(manual, sweeper)
        assert not task.done(), "the sweep loop survived"
    finally:
        sweeper.stop()
        await asyncio.gather(task, return_exceptions=True)
    assert [t for t, _ in recorder.ticks] == [at("2026-03-02 09:00:10"), at("2026-03-02 09:00:20")]
    failures = [r for r in caplog.records if "could not record the end of tick" in r.getMessage()]
    assert failures, "the failure is logged"
    assert failures[0].exc_info is not None, "with its traceback"
    assert "injected: disk I/O error" in caplog.text
    after = REGISTRY.get_sample_value("sweepline_sweep_loop_errors_total", {"sweep": name})
    assert after == before + 1, "and counted"
    row = await state(runtime.db, name)
    assert row.finished_tick_at == at("2026-03-02 09:00:20")
    assert row.lease_until is None


async def test_a_runner_that_lost_its_claim_stops_its_tick(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    name = f"test.lost.{uuid.uuid4().hex[:6]}"
    outcome: list[str] = []

    async def long_tick(ctx: JobContext, tick: datetime) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("stopped")
            raise

    sweeper = runner(runtime, [Sweep(name, EVERY_10_SECONDS, long_tick)])
    task = asyncio.create_task(sweeper.run())
    try:
        await settle(manual, sweeper)
        manual.advance(10)
        await eventually(lambda: _true(bool(sweeper.running)))
        async with runtime.db.write() as uow:  # another process took the sweep over
            await uow.session.execute(
                update(SweeperState)
                .where(SweeperState.name == name)
                .values(lease_owner="other", lease_until=manual.now() + timedelta(minutes=5))
            )
        manual.advance(LEASE / 3)  # the heartbeat finds the claim gone
        await settle(manual, sweeper)
        assert not task.done()
    finally:
        sweeper.stop()
        await asyncio.gather(task, return_exceptions=True)
    assert outcome == ["stopped"]
    row = await state(runtime.db, name)
    assert (row.lease_owner, row.ticks) == ("other", 0), "the new holder's claim is left alone"


async def test_a_sweep_that_cannot_complete_a_tick_makes_ready_answer_503_naming_it(
    runtime: Runtime, client: httpx.AsyncClient, clock: ManualClock
) -> None:
    name = f"test.stale.{uuid.uuid4().hex[:6]}"
    broken = True

    async def tick(ctx: JobContext, when: datetime) -> None:
        if broken:
            raise RuntimeError("the outside API is gone")

    runtime.sweeps[:] = [Sweep(name, EVERY_10_SECONDS, tick)]
    runtime.start_sweepers()
    sweeper = runtime._sweeper
    assert sweeper is not None
    await settle(clock, sweeper)
    for _ in range(3):
        clock.advance(10)
        await settle(clock, sweeper)
    assert (await client.get("/ready")).status_code == 200, "within three intervals"
    clock.advance(10)
    await settle(clock, sweeper)
    r = await client.get("/ready")
    assert r.status_code == 503
    assert r.json()["status"] == "unavailable"
    assert r.json()["stale"] == [name]
    (shown,) = [s for s in await sweeper_overview(runtime) if s.name == name]
    assert shown.stale, "the dashboard's sweeper table marks it"
    metrics = (await client.get("/metrics", headers=metrics_auth())).text
    assert f'sweepline_sweep_stale{{sweep="{name}"}} 1.0' in metrics
    broken = False
    clock.advance(10)
    await settle(clock, sweeper)
    assert (await client.get("/ready")).status_code == 200, "ready again after a good tick"
    assert REGISTRY.get_sample_value("sweepline_sweep_stale", {"sweep": name}) == 0.0


async def _true(value: bool) -> bool:
    return value
