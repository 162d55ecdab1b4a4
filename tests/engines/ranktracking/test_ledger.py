"""The append-only ledger (RT-37, RT-38): derived balance, resolution once, idempotently."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import select

from app.engines.ranktracking import ledger
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import LedgerEntry, Run
from app.engines.ranktracking.schedules.manual_runs import run_now
from app.runtime import Runtime
from tests.engines.ranktracking.factories import (
    available,
    available_micros,
    fund,
    make_schedule,
    principal,
)
from tests.factories import Tenant


async def test_rt38_settle_and_release_resolve_a_reservation_once(
    runtime: Runtime, tenant: Tenant
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(
        runtime, tenant, keywords=[f"k{i}" for i in range(100)], depth="top100"
    )
    (run_id,) = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    ).run_ids
    # 100 × 0.00465 USD (top 100: 1 + 9 × 0.75 pages) × 0.86 EUR/USD = 0.3999 EUR reserved
    assert await available_micros(runtime, tenant) == 10_000_000 - 399_900
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        # RT-24: charged at most the reservation, whatever is asked; the rest released.
        settled = await ledger.settle(
            uow.session,
            run,
            organisation_id=tenant.organisation_id,
            charge_micros=500_000,
            now=now,
            provider_cost=Decimal("0.465"),
        )
        assert settled is not None
        assert settled.charged_micros == 399_900
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        assert (
            await ledger.settle(
                uow.session, run, organisation_id=tenant.organisation_id, charge_micros=30, now=now
            )
            is None
        )
        assert not await ledger.release(
            uow.session, run, organisation_id=tenant.organisation_id, now=now, note="again"
        )
    assert await available_micros(runtime, tenant) == 10_000_000 - 399_900
    async with runtime.db.read() as session:
        entries = list(
            (await session.execute(select(LedgerEntry).order_by(LedgerEntry.id))).scalars()
        )
        view = await ledger.balance_of(session, tenant.organisation_id)
    assert [(e.kind, e.amount_micros) for e in entries] == [
        ("topup", 10_000_000),
        ("reservation", 399_900),
        ("settlement", 399_900),
    ]
    assert entries[2].reservation_id == entries[1].id
    assert entries[2].provider_cost == Decimal("0.465")  # recorded beside, never charged
    assert (view.credits_micros, view.settled_micros, view.reserved_micros) == (
        10_000_000,
        399_900,
        0,
    )


async def test_rt38_partial_settlement_releases_the_remainder(
    runtime: Runtime, tenant: Tenant
) -> None:
    await fund(runtime, tenant, 500)
    schedule = await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(100)])
    (run_id,) = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    ).run_ids
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        await ledger.settle(
            uow.session,
            run,
            organisation_id=tenant.organisation_id,
            charge_micros=20_000,
            now=runtime.clock.now(),
        )
    async with runtime.db.read() as session:
        kinds = [
            (e.kind, e.amount_micros)
            for e in (
                await session.execute(
                    select(LedgerEntry).where(LedgerEntry.run_id == run_id).order_by(LedgerEntry.id)
                )
            ).scalars()
        ]
    # 100 × 0.0006 USD × 0.86 = 0.0516 EUR reserved; 0.02 charged, 0.0316 released
    assert kinds == [("reservation", 51_600), ("settlement", 20_000), ("release", 31_600)]
    assert await available(runtime, tenant) == 498


async def test_rt21_month_spend_counts_settled_this_month_and_held(
    runtime: Runtime, tenant: Tenant, clock
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(100)])
    (run_id,) = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    ).run_ids
    async with runtime.db.read() as session:
        assert (
            await ledger.schedule_month_spend(session, schedule.id, clock.now()) == 51_600
        )  # held
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        await ledger.settle(
            uow.session,
            run,
            organisation_id=tenant.organisation_id,
            charge_micros=50_000,
            now=clock.now(),
        )
    async with runtime.db.read() as session:
        assert await ledger.schedule_month_spend(session, schedule.id, clock.now()) == 50_000
    clock.set(clock.now().replace(month=4, day=1, hour=0))  # a new UTC month starts from zero
    async with runtime.db.read() as session:
        assert await ledger.schedule_month_spend(session, schedule.id, clock.now()) == 0


async def test_rt37_rt38_each_entry_of_a_run_names_the_run_its_reservation_and_what_happened(
    runtime: Runtime, tenant: Tenant, clock
) -> None:
    """Every field of a settlement with a remainder and a provider gap, and of a release."""
    await fund(runtime, tenant, 1000)
    settled_s = await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(100)])
    released_s = await make_schedule(runtime, tenant, name="Other", keywords=["k"], domain="b.com")
    deps = RankTrackingDeps.of(runtime)
    (settled_id,) = (await run_now(deps, principal(tenant), settled_s.id, "standard")).run_ids
    (released_id,) = (await run_now(deps, principal(tenant), released_s.id, "standard")).run_ids
    clock.advance(minutes=5)
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, settled_id)
        other = await uow.session.get(Run, released_id)
        assert run is not None
        assert other is not None
        await ledger.settle(
            uow.session,
            run,
            organisation_id=tenant.organisation_id,
            charge_micros=20_000,
            now=clock.now(),
            provider_cost=Decimal("0.1"),
            provider_micros=86_000,
        )
        await ledger.release(
            uow.session, other, organisation_id=tenant.organisation_id, now=clock.now(), note="gone"
        )
    async with runtime.db.read() as session:
        rows = list(
            (
                await session.execute(
                    select(LedgerEntry)
                    .where(LedgerEntry.kind != "reservation", LedgerEntry.run_id.is_not(None))
                    .order_by(LedgerEntry.id)
                )
            ).scalars()
        )
        reservations = {
            e.run_id: e.id
            for e in (
                await session.execute(select(LedgerEntry).where(LedgerEntry.kind == "reservation"))
            ).scalars()
        }
    org, ws = tenant.organisation_id, tenant.workspace_id

    def entry(schedule_id: int, run_id: int, kind: str, amount: int, cost, note: str):
        return (org, ws, schedule_id, run_id, reservations[run_id], kind, amount, cost, note)

    assert [
        (
            e.organisation_id,
            e.workspace_id,
            e.schedule_id,
            e.run_id,
            e.reservation_id,
            e.kind,
            e.amount_micros,
            e.provider_cost,
            e.note,
        )
        for e in rows
    ] == [
        entry(
            settled_s.id,
            settled_id,
            "settlement",
            20_000,
            Decimal("0.1"),
            f"run {settled_id}: 0 measured",
        ),
        entry(
            settled_s.id,
            settled_id,
            "release",
            31_600,
            None,
            f"run {settled_id}: unused part of the reservation",
        ),
        entry(
            settled_s.id,
            settled_id,
            "reconcile",
            66_000,
            Decimal("0.1"),
            f"run {settled_id}: provider billed 0.1 USD (0.086000 EUR), charged 0.020000 EUR, "
            "above the reservation of 0.051600",
        ),
        entry(released_s.id, released_id, "release", 516, None, "gone"),
    ]
    assert {e.created_at for e in rows} == {clock.now()}
