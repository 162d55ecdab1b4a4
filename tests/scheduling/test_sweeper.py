"""Sweepers: schedules, ticks on a ManualClock, no overlap, tick-keyed work, recorded state and
metrics, and one tick per process group on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from app.clock import ManualClock
from app.db.session import Database
from app.runtime import Runtime
from app.scheduling.jobs import JobContext
from app.scheduling.models import Job, SweeperState
from app.scheduling.sweeper import (
    EVERY_10_SECONDS,
    HOURLY_AT_20,
    Every,
    HourlyAt,
    Sweep,
    SweepRunner,
    sweeper_states,
    tick_key,
)
from app.settings import Settings
from tests.conftest import eventually
from tests.scheduling.conftest import Runtimes
from tests.scheduling.testjobs import RECORD, Work

REPO = Path(__file__).resolve().parents[2]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def runner(runtime: Runtime, sweeps: list[Sweep], owner: str = "proc-a") -> SweepRunner:
    return SweepRunner(
        runtime.db, runtime.clock, sweeps, runtime.context, owner=owner, lease_seconds=600
    )


async def settle(clock: ManualClock, loops: int = 1, *runners: SweepRunner) -> None:
    """Wait until every sweep loop is asleep on the clock again (its tick, if any, finished;
    a running tick's lease heartbeat sleeps on the clock too)."""

    async def asleep() -> bool:
        return clock.sleepers == loops and not any(r.running for r in runners)

    await eventually(asleep)


async def state(db: Database, name: str) -> SweeperState:
    (row,) = [s for s in await sweeper_states(db) if s.name == name]
    return row


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("2026-03-02 09:00:00", "2026-03-02 09:20:00"),
        ("2026-03-02 09:19:59.999", "2026-03-02 09:20:00"),
        ("2026-03-02 09:20:00", "2026-03-02 10:20:00"),
        ("2026-03-02 23:20:00", "2026-03-03 00:20:00"),
        ("2026-03-31 23:45:00", "2026-04-01 00:20:00"),
        ("2026-02-28 23:59:59", "2026-03-01 00:20:00"),
        ("2026-12-31 23:21:00", "2027-01-01 00:20:00"),
    ],
)
def test_hourly_at_20_next_tick(after: str, expected: str) -> None:
    assert HOURLY_AT_20.next_tick(at(after)) == at(expected)
    assert HourlyAt(20).describe() == "hourly at :20 UTC"


def test_hourly_next_tick_of_a_time_in_another_zone_is_in_utc() -> None:
    from zoneinfo import ZoneInfo

    local = datetime(2026, 3, 2, 10, 25, tzinfo=ZoneInfo("Europe/Berlin"))  # 09:25 UTC
    assert HOURLY_AT_20.next_tick(local) == at("2026-03-02 10:20:00")


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("2026-03-02 09:00:00", "2026-03-02 09:00:10"),
        ("2026-03-02 09:00:09.5", "2026-03-02 09:00:10"),
        ("2026-03-31 23:59:55", "2026-04-01 00:00:00"),
    ],
)
def test_every_10_seconds_next_tick(after: str, expected: str) -> None:
    assert EVERY_10_SECONDS.next_tick(at(after)) == at(expected)
    assert Every(10).describe() == "every 10 s"


async def test_hourly_sweep_runs_at_20_past_across_a_day_and_a_month_boundary(
    runtimes: Runtimes,
) -> None:
    clock = ManualClock(at("2026-03-31 22:00:00"))
    runtime = runtimes.make("database", clock)
    ticks: list[datetime] = []

    async def tick(ctx: JobContext, when: datetime) -> None:
        assert ctx.clock.now() >= when
        ticks.append(when)

    sweeps = [Sweep("test.hourly", HOURLY_AT_20, tick)]
    sweeper = runner(runtime, sweeps)
    task = asyncio.create_task(sweeper.run())
    try:
        await settle(clock, 1, sweeper)
        while clock.now() < at("2026-04-01 02:00:00"):
            clock.advance(minutes=10)
            await settle(clock, 1, sweeper)
    finally:
        sweeper.stop()
        await asyncio.gather(task, return_exceptions=True)
    assert ticks == [
        at("2026-03-31 22:20:00"),
        at("2026-03-31 23:20:00"),
        at("2026-04-01 00:20:00"),
        at("2026-04-01 01:20:00"),
    ]
    row = await state(runtime.db, "test.hourly")
    assert (row.last_tick_at, row.ticks, row.failures) == (at("2026-04-01 01:20:00"), 4, 0)


async def test_a_slow_tick_does_not_overlap_the_next(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    started: list[datetime] = []
    active = 0
    most_active = 0
    release = asyncio.Event()

    async def slow(ctx: JobContext, when: datetime) -> None:
        nonlocal active, most_active
        active += 1
        most_active = max(most_active, active)
        started.append(when)
        try:
            if len(started) == 1:
                await release.wait()
        finally:
            active -= 1

    sweep = Sweep("test.slow", EVERY_10_SECONDS, slow)
    here = runner(runtime, [sweep], owner="proc-a")
    elsewhere = runner(runtime, [sweep], owner="proc-b")  # another process on the same database
    task = asyncio.create_task(here.run())
    try:
        await settle(manual, 1, here)
        manual.advance(10)  # 09:00:10: the first tick starts and blocks
        await eventually(lambda: _true(len(started) == 1))
        manual.advance(30)  # the 09:00:20, :30 and :40 ticks come due meanwhile
        # No second tick can have started: this loop is inside the first (it sleeps on no clock),
        # and a tick started anyway would show in ``started`` and ``most_active`` at the end.
        assert started == [at("2026-03-02 09:00:10")]
        assert not await elsewhere.run_tick(sweep, at("2026-03-02 09:00:20")), (
            "another process cannot start a tick while this one runs"
        )
        release.set()
        await settle(manual, 1, here)
        manual.advance(10)
        await settle(manual, 1, here)
    finally:
        here.stop()
        await asyncio.gather(task, return_exceptions=True)
    # Ticks missed during the slow one are skipped, not replayed in a burst.
    assert started == [at("2026-03-02 09:00:10"), at("2026-03-02 09:00:50")]
    assert most_active == 1


async def test_a_repeated_tick_enqueues_nothing_new(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)

    async def dispatch(ctx: JobContext, when: datetime) -> None:
        async with ctx.db.write() as uow:
            for entity_id in (7, 8):
                await ctx.queue.enqueue(
                    uow,
                    RECORD,
                    Work(key=f"e{entity_id}"),
                    job_id=tick_key("test.item", entity_id, when),
                )

    sweep = Sweep("test.dispatch", EVERY_10_SECONDS, dispatch)
    tick = at("2026-03-02 09:00:10")
    manual.set(tick)
    here = runner(runtime, [sweep])
    assert await here.run_tick(sweep, tick)
    assert not await here.run_tick(sweep, tick), "a tick is claimed once"
    await dispatch(runtime.context(), tick)  # even when the work itself runs again
    async with runtime.db.read() as session:
        ids = sorted((await session.execute(select(Job.id))).scalars())
    assert ids == ["test.item:7:20260302T090010Z", "test.item:8:20260302T090010Z"]


def _sample(name: str, sweep: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"sweep": sweep})


async def test_tick_duration_lag_and_failures_are_recorded_and_exported(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    name = f"test.metrics.{uuid.uuid4().hex[:6]}"

    async def failing(ctx: JobContext, when: datetime) -> None:
        manual.advance(1.5)
        raise ValueError("the data was bad")

    sweep = Sweep(name, EVERY_10_SECONDS, failing)
    tick = at("2026-03-02 09:00:10")
    manual.set(tick + timedelta(seconds=3))  # the process picked the tick up 3 s late
    assert await runner(runtime, [sweep]).run_tick(sweep, tick)
    row = await state(runtime.db, name)
    assert row.last_lag_ms == 3000
    assert row.last_duration_ms == 1500
    assert (row.ticks, row.failures) == (1, 1)
    assert row.last_error == "ValueError: the data was bad"
    assert row.lease_until is None, "the claim is released after a failure too"
    assert _sample("sweepline_sweep_failures_total", name) == 1.0
    assert _sample("sweepline_sweep_ticks_total", name) == 1.0
    assert _sample("sweepline_sweep_lag_seconds", name) == 3.0
    assert _sample("sweepline_sweep_duration_seconds_sum", name) == 1.5
    assert _sample("sweepline_sweep_duration_seconds_count", name) == 1.0

    from prometheus_client import generate_latest

    exported = generate_latest().decode()  # what /metrics serves
    assert f'sweepline_sweep_failures_total{{sweep="{name}"}} 1.0' in exported
    assert f'sweepline_sweep_lag_seconds{{sweep="{name}"}} 3.0' in exported


async def test_lag_is_now_minus_the_oldest_due_item_a_tick_reports(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    name = f"test.lag.{uuid.uuid4().hex[:6]}"
    tick = at("2026-03-02 09:00:10")

    async def behind(ctx: JobContext, when: datetime) -> datetime:
        return when - timedelta(seconds=90)  # a due row that has waited since 08:58:40

    sweep = Sweep(name, EVERY_10_SECONDS, behind)
    manual.set(tick + timedelta(seconds=3))
    assert await runner(runtime, [sweep]).run_tick(sweep, tick)
    assert (await state(runtime.db, name)).last_lag_ms == 93_000
    assert _sample("sweepline_sweep_lag_seconds", name) == 93.0


async def test_shutdown_lets_a_running_tick_finish_within_the_grace_period(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    finished: list[datetime] = []
    entered, proceed = asyncio.Event(), asyncio.Event()

    async def tick(ctx: JobContext, when: datetime) -> None:
        entered.set()
        await proceed.wait()
        finished.append(when)

    sweeps = [Sweep("test.graceful", EVERY_10_SECONDS, tick)]
    sweeper = runner(runtime, sweeps)
    task = asyncio.create_task(sweeper.run())
    await settle(manual, 1, sweeper)
    manual.advance(10)
    await asyncio.wait_for(entered.wait(), 10)  # the tick runs
    stopping = asyncio.create_task(sweeper.shutdown(grace=5))
    await eventually(lambda: _true(sweeper.stopping))  # waiting for the running tick
    assert not stopping.done()
    proceed.set()
    await asyncio.wait_for(stopping, 5)
    await asyncio.wait_for(task, 5)
    assert finished == [at("2026-03-02 09:00:10")]
    row = await state(runtime.db, "test.graceful")
    assert (row.last_error, row.lease_until) == (None, None)


async def test_shutdown_cancels_a_tick_outlasting_the_grace_and_releases_its_claim(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)

    entered = asyncio.Event()

    async def hangs(ctx: JobContext, when: datetime) -> None:
        entered.set()
        await asyncio.Event().wait()

    sweeps = [Sweep("test.hangs", EVERY_10_SECONDS, hangs)]
    sweeper = runner(runtime, sweeps)
    task = asyncio.create_task(sweeper.run())
    await settle(manual, 1, sweeper)
    manual.advance(10)
    await asyncio.wait_for(entered.wait(), 10)  # the tick runs (and will outlast the grace)
    await asyncio.wait_for(sweeper.shutdown(grace=0.2), 5)
    await asyncio.gather(task, return_exceptions=True)

    async def released() -> bool:
        return (await state(runtime.db, "test.hangs")).lease_until is None

    await eventually(released)
    row = await state(runtime.db, "test.hangs")
    assert row.last_error == "cancelled during shutdown"


async def test_a_platform_stop_skips_ticks_but_keeps_the_schedule(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    ran: list[datetime] = []

    async def tick(ctx: JobContext, when: datetime) -> None:
        ran.append(when)

    sweep = Sweep("test.stoppable", EVERY_10_SECONDS, tick)
    stopped = SweepRunner(
        runtime.db,
        manual,
        [sweep],
        runtime.context,
        owner="p",
        lease_seconds=60,
        stopped=lambda: True,
    )
    manual.advance(10)
    assert await stopped.run_tick(sweep, manual.now())
    assert ran == []
    assert (await state(runtime.db, "test.stoppable")).last_tick_at == manual.now()


@pytest.mark.postgres
async def test_two_processes_handle_each_tick_exactly_once(
    settings: Settings, shared_db: Database
) -> None:
    name = f"test.two_processes.{uuid.uuid4().hex[:6]}"
    period, count = 0.4, 6
    env = {
        **os.environ,
        "DATABASE_URL": settings.database.url,
        "ENCRYPTION_KEY": settings.security.encryption_key,
        "SESSION_SECRET": settings.web.session_secret,
        "REDIS_URL": "",
    }
    args = [sys.executable, "-m", "tests.scheduling.sweep_proc", name, str(period), str(count)]
    procs = [
        subprocess.Popen(
            args,
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None
        ready = await asyncio.to_thread(proc.stdout.readline)
        assert ready.strip() == b"ready", ready
    # Both processes wait for the same wall-clock instants. Far enough ahead that both are
    # waiting for it even on a loaded machine (a process that starts late races nothing).
    first_tick = time.time() + 5.0
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{first_tick}\n".encode())
        proc.stdin.close()
        proc.stdin = None  # so communicate() below only collects the output
    outputs = []
    for proc in procs:
        out, err = await asyncio.to_thread(proc.communicate, None, 60)
        assert proc.returncode == 0, err.decode()
        outputs.append(json.loads(out.decode().strip().splitlines()[-1]))
    claimed = [set(o["claimed"]) for o in outputs]
    assert all(not o["late"] for o in outputs), "a process started after the first tick"
    assert not claimed[0] & claimed[1], "no tick ran in both processes"
    assert len(claimed[0] | claimed[1]) == count, "every tick ran in one of them"
    async with shared_db.read() as session:
        handled = list(
            (await session.execute(select(Job.id).where(Job.id.like(f"{name}:%")))).scalars()
        )
    per_tick: dict[str, int] = {}
    for job_id in handled:
        tick = job_id.split(":")[1]
        per_tick[tick] = per_tick.get(tick, 0) + 1
    assert len(per_tick) == count
    assert set(per_tick.values()) == {1}


async def _true(value: bool) -> bool:
    return value
