"""The append-only ledger (RT-37, RT-38): derived balance, resolution once, idempotently."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import select

from app.engines.ranktracking import ledger
from app.engines.ranktracking.models import LedgerEntry, Run
from app.engines.ranktracking.service import run_now
from app.runtime import Runtime
from tests.factories import Tenant
from tests.ranktracking.conftest import available, fund, make_schedule, principal


async def test_rt38_settle_and_release_resolve_a_reservation_once(
    runtime: Runtime, tenant: Tenant
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(
        runtime, tenant, keywords=[f"k{i}" for i in range(100)], depth="top100"
    )
    (run_id,) = (await run_now(runtime, principal(tenant), schedule.id, "standard")).run_ids
    assert await available(runtime, tenant) == 988
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        # RT-24: charged at most the reservation, whatever is asked; the rest released.
        assert (
            await ledger.settle(
                uow.session,
                run,
                organisation_id=tenant.organisation_id,
                charge_cents=50,
                now=now,
                provider_cost=Decimal("0.0405"),
            )
            == 12
        )
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        assert (
            await ledger.settle(
                uow.session, run, organisation_id=tenant.organisation_id, charge_cents=3, now=now
            )
            is None
        )
        assert not await ledger.release(
            uow.session, run, organisation_id=tenant.organisation_id, now=now, note="again"
        )
    assert await available(runtime, tenant) == 988
    async with runtime.db.read() as session:
        entries = list(
            (await session.execute(select(LedgerEntry).order_by(LedgerEntry.id))).scalars()
        )
        view = await ledger.balance_of(session, tenant.organisation_id)
    assert [(e.kind, e.amount_cents) for e in entries] == [
        ("topup", 1000),
        ("reservation", 12),
        ("settlement", 12),
    ]
    assert entries[2].reservation_id == entries[1].id
    assert entries[2].provider_cost == Decimal("0.0405")  # recorded beside, never charged
    assert (view.credits_cents, view.settled_cents, view.reserved_cents) == (1000, 12, 0)


async def test_rt38_partial_settlement_releases_the_remainder(
    runtime: Runtime, tenant: Tenant
) -> None:
    await fund(runtime, tenant, 500)
    schedule = await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(100)])
    (run_id,) = (await run_now(runtime, principal(tenant), schedule.id, "standard")).run_ids
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        await ledger.settle(
            uow.session,
            run,
            organisation_id=tenant.organisation_id,
            charge_cents=2,
            now=runtime.clock.now(),
        )
    async with runtime.db.read() as session:
        kinds = [
            (e.kind, e.amount_cents)
            for e in (
                await session.execute(
                    select(LedgerEntry).where(LedgerEntry.run_id == run_id).order_by(LedgerEntry.id)
                )
            ).scalars()
        ]
    assert kinds == [("reservation", 6), ("settlement", 2), ("release", 4)]
    assert await available(runtime, tenant) == 498


async def test_rt21_month_spend_counts_settled_this_month_and_held(
    runtime: Runtime, tenant: Tenant, clock
) -> None:  # type: ignore[no-untyped-def]
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(100)])
    (run_id,) = (await run_now(runtime, principal(tenant), schedule.id, "standard")).run_ids
    async with runtime.db.read() as session:
        assert await ledger.schedule_month_spend(session, schedule.id, clock.now()) == 6  # held
    async with runtime.db.write() as uow:
        run = await uow.session.get(Run, run_id)
        assert run is not None
        await ledger.settle(
            uow.session,
            run,
            organisation_id=tenant.organisation_id,
            charge_cents=5,
            now=clock.now(),
        )
    async with runtime.db.read() as session:
        assert await ledger.schedule_month_spend(session, schedule.id, clock.now()) == 5
    clock.set(clock.now().replace(month=4, day=1, hour=0))  # a new UTC month starts from zero
    async with runtime.db.read() as session:
        assert await ledger.schedule_month_spend(session, schedule.id, clock.now()) == 0
