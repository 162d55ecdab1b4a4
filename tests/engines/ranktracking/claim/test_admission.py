"""Admission: cap and balance blocks, reservations all-or-nothing, manual runs and the baseline
(RT-20 to RT-27)."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import func, select

from app.engines.ranktracking.claim.admission import MANUAL, RECURRING
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Activity, LedgerEntry, Request, Run, Schedule
from app.engines.ranktracking.schedules.creation import create_and_baseline
from app.engines.ranktracking.schedules.lifecycle import pause, resume
from app.engines.ranktracking.schedules.manual_runs import run_now
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from app.scheduling.models import Job
from app.scheduling.queue import DatabaseQueue
from tests.engines.ranktracking.factories import available, fund, make_schedule, principal, serp_in
from tests.factories import Tenant


async def _schedule(runtime: Runtime, schedule_id: int) -> Schedule:
    async with runtime.db.read() as session:
        row = await session.get(Schedule, schedule_id)
        assert row is not None
        return row


async def _count(runtime: Runtime, model: type, **where: object) -> int:
    async with runtime.db.read() as session:
        stmt = select(func.count()).select_from(model)
        for key, value in where.items():
            stmt = stmt.where(getattr(model, key) == value)
        return int(await session.scalar(stmt) or 0)


async def test_rt21_rt23_cap_block_and_balance_block_have_distinct_codes(
    runtime: Runtime, tenant: Tenant
) -> None:
    # 200 keywords × 0.003999 EUR (top 100: 0.00465 USD at 0.86 EUR/USD) × 2 devices = 1.5996 EUR
    # a request: 4.80 EUR already spent leaves no room under a 5 EUR cap.
    keywords = [f"kw {i}" for i in range(200)]
    capped = await make_schedule(
        runtime,
        tenant,
        keywords=keywords,
        depth="top100",
        devices=["desktop", "mobile"],
        monthly_cap_eur=Decimal("5"),
    )
    await fund(runtime, tenant, 10_000)
    async with runtime.db.write() as uow:
        # 4.80 EUR already settled this month for this schedule.
        uow.session.add(
            LedgerEntry(
                organisation_id=tenant.organisation_id,
                schedule_id=capped.id,
                kind="settlement",
                amount_micros=4_800_000,
                note="earlier",
                created_at=runtime.clock.now(),
            )
        )
    launch = await run_now(RankTrackingDeps.of(runtime), principal(tenant), capped.id, "standard")
    assert (launch.launched, launch.reason, launch.code) == (0, "cap", "cap_reached")

    poor = await make_schedule(
        runtime, tenant, name="poor", keywords=["a", "b"], location_code=2250
    )
    async with runtime.db.write() as uow:
        from app.engines.ranktracking import ledger

        # Spend the whole balance elsewhere: an active reservation of another schedule.
        balance = await ledger.lock_balance(
            uow.session, tenant.organisation_id, runtime.clock.now()
        )
        assert balance.available_micros == 100_000_000
    other = await make_schedule(
        runtime,
        tenant,
        name="big",
        keywords=[f"x{i}" for i in range(200)],
        depth="top100",
        location_code=2276,
    )
    async with runtime.db.write() as uow:
        from app.engines.ranktracking import ledger as lg

        balance = await lg.lock_balance(uow.session, tenant.organisation_id, runtime.clock.now())
        run = Run(
            workspace_id=tenant.workspace_id,
            schedule_id=other.id,
            request_id=(await _request(uow.session, other)).id,
            data_type="serp",
            device="desktop",
            queue="standard",
            keywords=[],
            status="running",
            requested=0,
            retrieved=0,
            no_data=0,
            reserved_micros=0,
            reservation_state="none",
            polls=0,
            created_at=runtime.clock.now(),
            updated_at=runtime.clock.now(),
        )
        uow.session.add(run)
        await uow.session.flush()
        assert await lg.reserve(
            uow.session,
            balance,
            run,
            organisation_id=tenant.organisation_id,
            amount_micros=100_000_000,
            now=runtime.clock.now(),
        )
    assert await available(runtime, tenant) == 0
    launch = await run_now(RankTrackingDeps.of(runtime), principal(tenant), poor.id, "standard")
    assert (launch.launched, launch.reason, launch.code) == (0, "balance", "insufficient_balance")
    async with runtime.db.read() as session:
        codes = set(
            (
                await session.execute(select(Run.error_code).where(Run.status == "skipped_balance"))
            ).scalars()
        )
    assert codes == {"cap_reached", "insufficient_balance"}


async def _request(session, schedule: Schedule) -> Request:
    req = Request(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        trigger="manual",
        queue="standard",
        created_at=schedule.created_at,
    )
    session.add(req)
    await session.flush()
    return req


async def test_rt22_second_device_reservation_fails_nothing_reserved_no_rows_left(
    runtime: Runtime, tenant: Tenant
) -> None:
    """A balance for exactly one device: the desktop reservation succeeds, the mobile one does
    not, and the savepoint takes back the first reservation and both provisional runs."""
    schedule = await make_schedule(
        runtime, tenant, keywords=[f"k{i}" for i in range(100)], devices=["desktop", "mobile"]
    )
    await fund(runtime, tenant, 6)  # one device costs 5.16 cents (100 × 0.0006 USD × 0.86)
    launch = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    assert (launch.launched, launch.code) == (0, "insufficient_balance")
    assert await _count(runtime, LedgerEntry, kind="reservation") == 0
    assert await _count(runtime, Run, status="dispatching") == 0
    async with runtime.db.read() as session:
        rows = list(
            (await session.execute(select(Run).where(Run.schedule_id == schedule.id))).scalars()
        )
    # Only the coded trace of the skipped group is left: one row per device, nothing reserved.
    assert sorted((r.device, r.status, r.reserved_micros, r.reservation_state) for r in rows) == [
        ("desktop", "skipped_balance", 0, "none"),
        ("mobile", "skipped_balance", 0, "none"),
    ]
    assert await available(runtime, tenant) == 6


async def test_rt23_two_consecutive_blocks_pause_and_queue_a_notice(
    runtime: Runtime, tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant)
    first = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    assert first.code == "insufficient_balance"
    assert (await _schedule(runtime, schedule.id)).status == "active"
    second = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    assert second.code == "insufficient_balance"
    row = await _schedule(runtime, schedule.id)
    assert (row.status, row.consecutive_blocks) == ("paused_balance", 2)
    assert await _count(runtime, Activity, kind="pause_notice") == 1
    if isinstance(runtime.queue, DatabaseQueue):
        assert await _count(runtime, Job, name="ranktracking.pause_notice") == 1
    # Adding balance does not reactivate it by itself, and run now says why.
    await fund(runtime, tenant, 1000)
    third = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    assert (third.launched, third.reason, third.code) == (0, "paused", "schedule_paused_balance")
    assert (await _schedule(runtime, schedule.id)).status == "paused_balance"


async def test_rt23_counter_reset_by_a_partial_group(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    sim.script("blue shoes", task_error=50000)
    schedule = await make_schedule(runtime, tenant)
    assert (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    ).code == "insufficient_balance"
    assert (await _schedule(runtime, schedule.id)).consecutive_blocks == 1
    await fund(runtime, tenant, 1000)
    launch = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, launch.run_ids[0], final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    async with runtime.db.read() as session:
        run = await session.get(Run, launch.run_ids[0])
        assert run is not None
        assert run.status == "partial"
    assert (await _schedule(runtime, schedule.id)).consecutive_blocks == 0


async def test_rt26_run_now_says_why_nothing_launched(runtime: Runtime, tenant: Tenant) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    launched = await run_now(
        RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard"
    )
    assert (launched.launched, launched.reason) == (1, None)
    again = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    assert (again.launched, again.reason, again.code) == (0, "active_run", "run_active")
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await pause(uow.session, row, runtime.clock.now())
    paused = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    assert (paused.launched, paused.reason, paused.code) == (0, "paused", "schedule_paused")


async def test_rt26_admitted_manual_run_moves_the_anchor(
    runtime: Runtime, tenant: Tenant, clock
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, frequency="weekly")
    clock.advance(hours=50)
    await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    row = await _schedule(runtime, schedule.id)
    assert row.anchor_at == clock.now()
    assert row.next_due_at == clock.now().replace() + (row.next_due_at - row.anchor_at)
    assert (row.next_due_at - row.anchor_at).days == 7


async def test_rt25_measure_quickly_uses_the_priority_queue_and_price(
    runtime: Runtime, tenant: Tenant
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(100)])
    launch = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "priority")
    async with runtime.db.read() as session:
        run = await session.get(Run, launch.run_ids[0])
        assert run is not None
        # 100 keywords × 0.0012 USD (priority page) × 0.86 EUR/USD = 0.1032 EUR
        assert (run.queue, run.reserved_micros) == ("priority", 103_200)
    if isinstance(runtime.queue, DatabaseQueue):
        async with runtime.db.read() as session:
            job = await session.scalar(select(Job).where(Job.id == f"rt.post:{launch.run_ids[0]}"))
            assert job is not None
            assert job.queue == "priority"


async def test_rt27_creation_reports_the_baseline_outcome(runtime: Runtime, tenant: Tenant) -> None:
    schedule, launch = await create_and_baseline(
        RankTrackingDeps.of(runtime), principal(tenant), serp_in()
    )
    assert schedule.id
    assert (launch.launched, launch.reason, launch.code) == (
        0,
        "balance",
        "insufficient_balance",
    )
    await fund(runtime, tenant, 1000)
    _other, launch = await create_and_baseline(
        RankTrackingDeps.of(runtime), principal(tenant), serp_in(name="second", location_code=2250)
    )
    assert (launch.launched, launch.reason) == (1, None)
    async with runtime.db.read() as session:
        request = await session.get(Request, launch.request_id)
        assert request is not None
        assert request.trigger == "baseline"


async def test_rt28_pause_closes_runs_and_releases_resume_is_due_now(
    runtime: Runtime, tenant: Tenant, clock
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, devices=["desktop", "mobile"])
    launch = await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    assert launch.launched == 2
    # 2 keywords × 0.000516 EUR × 2 devices, reserved to the micro: no rounding to the cent.
    assert await available(runtime, tenant) == Decimal("999.7936")
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await pause(uow.session, row, clock.now())
    async with runtime.db.read() as session:
        runs = list(
            (await session.execute(select(Run).where(Run.id.in_(launch.run_ids)))).scalars()
        )
    assert {(r.status, r.error_code, r.reservation_state) for r in runs} == {
        ("failed", "cancelled", "released")
    }
    assert await available(runtime, tenant) == 1000
    clock.advance(hours=3)
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await resume(uow.session, row, clock.now())
    row = await _schedule(runtime, schedule.id)
    assert (row.status, row.next_due_at, row.consecutive_failures) == ("active", clock.now(), 0)
    # Resume does not rebuild the cancelled run: no new request was written.
    assert await _count(runtime, Request, schedule_id=schedule.id) == 1


async def test_rt24_recurring_request_uses_the_same_path(
    runtime: Runtime, tenant: Tenant, clock
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    early = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule.id,
        trigger=RECURRING,
        queue="standard",
        now=clock.now(),
    )
    assert early.reason == "not_due"
    clock.advance(days=1, minutes=20)
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule.id,
        trigger=RECURRING,
        queue="standard",
        now=clock.now(),
    )
    assert launch.launched == 1
    row = await _schedule(runtime, schedule.id)
    assert row.next_due_at == schedule.anchor_at.replace() + (row.next_due_at - schedule.anchor_at)
    assert (row.next_due_at - schedule.anchor_at).days == 2
    manual = await admit_and_send(
        RankTrackingDeps.of(runtime), schedule.id, trigger=MANUAL, queue="standard", now=clock.now()
    )
    assert manual.code == "run_active"
