"""The recurring sweep claims due schedules with the shared claim primitive and advances their due
time in the same transaction (RT-30): two sweeps at once admit each schedule once, and a schedule
another admission holds is skipped instead of waited for."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from app.engines.ranktracking.claim.admission import RECURRING, admit_many
from app.engines.ranktracking.claim.dispatch import dispatch_due
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Request, Schedule
from app.runtime import Runtime
from tests.engines.ranktracking.factories import fund, make_schedule
from tests.factories import Tenant


async def _due_schedules(runtime: Runtime, tenant: Tenant, n: int) -> list[int]:
    ids = [(await make_schedule(runtime, tenant, name=f"c{i}")).id for i in range(n)]
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Schedule)
            .where(Schedule.id.in_(ids))
            .values(next_due_at=now - timedelta(hours=1))
        )
    return ids


async def _requests_per_schedule(runtime: Runtime) -> dict[int, int]:
    async with runtime.db.read() as session:
        rows = await session.execute(
            select(Request.schedule_id, func.count()).group_by(Request.schedule_id)
        )
        return {int(s): int(n) for s, n in rows.all()}


async def test_rt30_two_sweeps_at_once_admit_each_due_schedule_once(
    runtime: Runtime, tenant: Tenant
) -> None:
    await fund(runtime, tenant, 10_000)
    ids = await _due_schedules(runtime, tenant, 12)
    now = runtime.clock.now()
    first, second = await asyncio.gather(
        dispatch_due(RankTrackingDeps.of(runtime), now),
        dispatch_due(RankTrackingDeps.of(runtime), now),
    )
    assert first.errors == second.errors == 0
    assert first.launched_runs + second.launched_runs == 12
    assert await _requests_per_schedule(runtime) == dict.fromkeys(ids, 1)
    async with runtime.db.read() as session:
        due = await session.scalars(select(Schedule.next_due_at).where(Schedule.id.in_(ids)))
        assert all(d > now for d in due)
    # Once committed the schedules are no longer due: a third sweep finds nothing.
    third = await dispatch_due(RankTrackingDeps.of(runtime), now)
    assert (third.selected, third.launched_runs) == (0, 0)


async def test_rt30_a_schedule_no_longer_due_is_not_admitted_by_a_stale_selection(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The sweep selected the schedule before another sweep admitted it: the claim inside the
    admission's transaction finds it no longer due and leaves no request row."""
    await fund(runtime, tenant, 10_000)
    (schedule_id,) = await _due_schedules(runtime, tenant, 1)
    now = runtime.clock.now()
    assert (await dispatch_due(RankTrackingDeps.of(runtime), now)).launched_runs == 1
    async with runtime.db.write() as uow:
        (launch,) = await admit_many(
            uow, RankTrackingDeps.of(runtime), [schedule_id], trigger=RECURRING, now=now
        )
    assert (launch.reason, launch.code, launch.request_id) == ("not_due", "not_due", None)
    assert await _requests_per_schedule(runtime) == {schedule_id: 1}


@pytest.mark.postgres
async def test_rt30_a_schedule_held_by_another_admission_is_skipped_not_waited_for(
    runtime: Runtime, tenant: Tenant
) -> None:
    await fund(runtime, tenant, 10_000)
    held, *free = await _due_schedules(runtime, tenant, 3)
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        # Another admission's lock on one schedule, held while the sweep runs.
        await uow.session.execute(select(Schedule.id).where(Schedule.id == held).with_for_update())
        report = await asyncio.wait_for(dispatch_due(RankTrackingDeps.of(runtime), now), timeout=30)
    assert report.launched_runs == 2
    assert report.outcomes == {"launched": 2, "not_due": 1}
    assert await _requests_per_schedule(runtime) == dict.fromkeys(free, 1)
    # It stays due: the next sweep takes it.
    assert (await dispatch_due(RankTrackingDeps.of(runtime), now)).launched_runs == 1
