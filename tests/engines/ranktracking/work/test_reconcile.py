"""Reconciliation (RT-24): what a crash left open is closed — a dispatch that never reached the
queue is released, a run stale past its wall time is ended and settled."""

from __future__ import annotations

from sqlalchemy import update

from app.clock import ManualClock
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Run
from app.engines.ranktracking.schedules.manual_runs import run_now
from app.engines.ranktracking.work.reconcile import reconcile
from app.runtime import Runtime
from tests.engines.ranktracking.factories import available, fund, make_schedule, principal
from tests.factories import Tenant


async def test_rt24_reconciliation_closes_lost_dispatches_and_stale_runs(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    await fund(runtime, tenant, 1000)
    a = await make_schedule(runtime, tenant, name="a")
    b = await make_schedule(runtime, tenant, name="b")
    lost = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), a.id, "standard")
    ).run_ids[0]
    stale = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), b.id, "standard")
    ).run_ids[0]
    async with runtime.db.write() as uow:
        await uow.session.execute(update(Run).where(Run.id == stale).values(status="running"))
    clock.advance(hours=2)
    report = await reconcile(RankTrackingDeps.of(runtime), clock.now())
    assert (report.undispatched, report.stale_ended) == (1, 0)
    clock.advance(hours=6)
    report = await reconcile(RankTrackingDeps.of(runtime), clock.now())
    assert report.stale_ended == 1
    async with runtime.db.read() as session:
        lost_run = await session.get(Run, lost)
        stale_run = await session.get(Run, stale)
    assert lost_run is not None
    assert stale_run is not None
    assert (lost_run.status, lost_run.error_code, lost_run.reservation_state) == (
        "skipped_dispatch",
        "dispatch_lost",
        "released",
    )
    assert (stale_run.status, stale_run.error_code, stale_run.reservation_state) == (
        "failed",
        "stale",
        "settled",
    )
    assert stale_run.settled_micros == 0
    assert await available(runtime, tenant) == 1000
