"""The hourly dispatcher (RT-30 to RT-32)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from app.clock import ManualClock
from app.engines.ranktracking.claim.dispatch import DISPATCH_SWEEP, dispatch_due
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Request, Run, Schedule
from app.engines.ranktracking.records.schedules import next_run_label
from app.runtime import Runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.sweeper import SweepRunner
from tests.conftest import eventually
from tests.engines.ranktracking.factories import available, fund, make_schedule
from tests.factories import Tenant


async def _schedules(runtime: Runtime) -> dict[int, Schedule]:
    async with runtime.db.read() as session:
        return {s.id: s for s in (await session.execute(select(Schedule))).scalars()}


async def test_rt30_hourly_sweep_fires_at_20_and_takes_a_bounded_batch_oldest_first(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    await fund(runtime, tenant, 10_000)
    ids = [(await make_schedule(runtime, tenant, name=f"s{i}")).id for i in range(5)]
    base = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
    async with runtime.db.write() as uow:
        # Oldest due first: the last created is the most overdue.
        for offset, schedule_id in enumerate(reversed(ids)):
            await uow.session.execute(
                update(Schedule)
                .where(Schedule.id == schedule_id)
                .values(next_due_at=base + timedelta(minutes=offset))
            )
    small = dataclasses.replace(
        runtime.settings,
        ranktracking=dataclasses.replace(runtime.settings.ranktracking, dispatch_batch=3),
    )
    process = RankTrackingDeps.of(runtime)
    runtime.resources.provide(
        RankTrackingDeps, lambda: dataclasses.replace(process, settings=small)
    )
    runner = SweepRunner(
        runtime.db,
        clock,
        [DISPATCH_SWEEP],
        lambda: dataclasses.replace(runtime.context(), settings=small),
        owner="test",
        lease_seconds=600,
    )
    task = asyncio.create_task(runner.run())

    async def asleep() -> bool:
        """The sweep loop waits for its next tick (a running tick's lease heartbeat sleeps on
        the clock too, hence the running check); ``set()`` drops the sleepers it wakes."""
        return clock.sleepers == 1 and not runner.running

    try:
        await eventually(asleep)
        clock.set(datetime(2026, 3, 2, 9, 20, tzinfo=UTC))  # the 09:20 tick: nothing due yet
        await eventually(asleep)
        clock.set(datetime(2026, 3, 2, 10, 19, tzinfo=UTC))
        await eventually(asleep)  # had 10:19 woken the sweep, its tick would be over now
        assert await _requests(runtime) == 0  # due since 09:30, but the sweep runs at :20
        labels = {next_run_label(s, clock.now()) for s in (await _schedules(runtime)).values()}
        assert labels == {"pending"}
        clock.set(datetime(2026, 3, 2, 10, 20, tzinfo=UTC))
        await eventually(lambda: _has(runtime, 3))
        await eventually(asleep)  # the 10:20 tick is over
        assert await _requests(runtime) == 3  # bounded batch
        served = set(await _request_schedules(runtime))
        assert served == set(list(reversed(ids))[:3])  # the three oldest due
        clock.set(datetime(2026, 3, 2, 11, 20, tzinfo=UTC))
        await eventually(lambda: _has(runtime, 5))
    finally:
        runner.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _requests(runtime: Runtime) -> int:
    return len(await _request_schedules(runtime))


async def _request_schedules(runtime: Runtime) -> list[int]:
    async with runtime.db.read() as session:
        return list((await session.execute(select(Request.schedule_id))).scalars())


async def _has(runtime: Runtime, n: int) -> bool:
    return await _requests(runtime) >= n


async def test_rt31_skipped_dispatch_releases_and_retries_after_one_hour(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    """The work queue cannot be reached (a broker on a closed port): skipped_dispatch, the
    reservation released, the schedule "retrying" one hour later, then the normal frequency."""
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    broker = ArqQueue(runtime.db, clock, "redis://127.0.0.1:1/0", "unreachable")
    deps = dataclasses.replace(RankTrackingDeps.of(runtime), queue=broker)
    clock.set(datetime(2026, 3, 3, 9, 20, tzinfo=UTC))
    report = await dispatch_due(deps, clock.now())
    assert report.outcomes == {"dispatch": 1}
    async with runtime.db.read() as session:
        run = await session.scalar(select(Run).where(Run.schedule_id == schedule.id))
        row = await session.get(Schedule, schedule.id)
    assert run is not None
    assert row is not None
    assert (run.status, run.error_code, run.reservation_state) == (
        "skipped_dispatch",
        "dispatch_failed",
        "released",
    )
    assert await available(runtime, tenant) == 1000
    assert row.retrying
    assert row.next_due_at == clock.now() + timedelta(hours=1)
    assert next_run_label(row, clock.now()) == "retrying"
    await broker.aclose()
    # One hour later the worker is reachable again: the retry goes out and the frequency resumes
    # on the original grid (09:00 daily), not from the retry's time.
    clock.set(datetime(2026, 3, 3, 10, 20, tzinfo=UTC))
    report = await dispatch_due(RankTrackingDeps.of(runtime), clock.now())
    assert report.launched_runs == 1
    row = (await _schedules(runtime))[schedule.id]
    assert not row.retrying
    assert row.next_due_at == datetime(2026, 3, 4, 9, 0, tzinfo=UTC)


async def test_rt5_rt32_list_grown_past_500_fails_before_dispatch_with_members_error(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    from tests.engines.ranktracking.factories import make_list

    await fund(runtime, tenant, 10_000)
    kl = await make_list(runtime, tenant, [f"kw {i}" for i in range(500)])
    schedule = await make_schedule(runtime, tenant, list_id=kl.id)
    from app.engines.ranktracking.lists import add_keywords
    from app.engines.ranktracking.models import KeywordList

    async with runtime.db.write() as uow:
        row = await uow.session.get(KeywordList, kl.id)
        assert row is not None
        await add_keywords(uow.session, row, ["one more"], now=clock.now())
    clock.set(datetime(2026, 3, 3, 9, 20, tzinfo=UTC))
    report = await dispatch_due(RankTrackingDeps.of(runtime), clock.now())
    assert report.outcomes == {"members": 1}
    async with runtime.db.read() as session:
        runs = list(
            (await session.execute(select(Run).where(Run.schedule_id == schedule.id))).scalars()
        )
    assert [(r.status, r.error_code, r.requested, r.reserved_micros) for r in runs] == [
        ("failed", "members_over_limit", 0, 0)
    ]
    # Creation's and the estimates' refusal (test_rules.py pins it), and that nothing went out.
    assert runs[0].error_message == (
        "the list has 501 keywords; a run may request at most 500; nothing was sent"
    )
    assert await available(runtime, tenant) == 10_000
