"""Money as the provider bills it (RT-24, RT-37, RT-38): the provider's reported cost is compared
with every settlement; a gap is a reconciliation entry (ledger, activity feed, metric, balance
page), while the settlement itself stays within the reservation; sub-cent amounts add up exactly."""

from __future__ import annotations

from decimal import Decimal

import httpx
from prometheus_client import REGISTRY
from sqlalchemy import func, select

from app.engines.ranktracking import ledger
from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Activity, Balance, LedgerEntry, Request, Run
from app.engines.ranktracking.pricing import PriceList, billable_micros
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.runtime import Runtime
from app.sandbox.serp import SerpPrices, SerpSimulator
from tests.engines.ranktracking.factories import DOMAIN, available_micros, fund, make_schedule
from tests.factories import Tenant


def _gaps(above: str) -> float:
    value = REGISTRY.get_sample_value(
        "sweepline_ranktracking_provider_cost_gaps_total",
        {"data_type": "serp", "above_reservation": above},
    )
    return value or 0.0


async def _run_to_the_end(runtime: Runtime, schedule_id: int) -> Run:
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule_id,
        trigger=MANUAL,
        queue="standard",
        now=runtime.clock.now(),
    )
    (run_id,) = launch.run_ids
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    async with runtime.db.read() as session:
        run = await session.get(Run, run_id)
        assert run is not None
        return run


async def _entries(runtime: Runtime, run_id: int) -> list[LedgerEntry]:
    async with runtime.db.read() as session:
        return list(
            (
                await session.execute(
                    select(LedgerEntry).where(LedgerEntry.run_id == run_id).order_by(LedgerEntry.id)
                )
            ).scalars()
        )


async def test_rt37_provider_cost_above_the_reservation_is_reconciled_settlement_capped(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, client: httpx.AsyncClient
) -> None:
    """The provider raised its price tenfold: the run is charged exactly its reservation (never
    more, RT-37), the balance stays positive, and the gap is a ``reconcile`` ledger entry, a feed
    row naming the unit-price drift (RT-53), a metric sample and a line on the balance page."""
    sim.prices = SerpPrices(serp_page_standard=Decimal("0.006"))
    sim.place("red shoes", DOMAIN, 3)
    sim.place("blue shoes", DOMAIN, 8)
    await fund(runtime, tenant, 1)  # 0.01 EUR: enough for the reservation (2 × 0.000516)
    schedule = await make_schedule(runtime, tenant)
    before = _gaps("true")

    run = await _run_to_the_end(runtime, schedule.id)

    assert (run.status, run.retrieved) == ("succeeded", 2)
    assert run.provider_cost == Decimal("0.012")  # 2 tasks × 0.006 USD, as the provider reported
    assert run.reserved_micros == 1032
    assert run.settled_micros == run.reserved_micros  # capped at the reservation
    entries = await _entries(runtime, run.id)
    assert [(e.kind, e.amount_micros) for e in entries] == [
        ("reservation", 1032),
        ("settlement", 1032),
        # 0.012 USD × 0.86 = 0.01032 EUR billed, 0.001032 charged
        ("reconcile", 10_320 - 1032),
    ]
    assert entries[2].provider_cost == Decimal("0.012")
    assert "above the reservation" in entries[2].note
    assert await available_micros(runtime, tenant) == 10_000 - 1032
    assert _gaps("true") == before + 1
    async with runtime.db.read() as session:
        feed = (
            await session.execute(select(Activity).where(Activity.kind == "reconciliation"))
        ).scalar_one()
        balance = await session.get(Balance, tenant.organisation_id)
    assert feed.run_id == run.id
    # RT-53: the alarm names the unit prices, the drift and what it means.
    assert feed.code == "provider_price_above_list"
    assert "0.006 USD per check (2 billed" in feed.message
    assert "900.0% above" in feed.message
    assert balance is not None
    assert balance.available_micros >= 0

    from tests.platform.conftest import sign_in

    await sign_in(client, tenant.email, tenant.password)
    page = await client.get("/ui/ranktracking/balance")
    assert page.status_code == 200
    assert "Provider cost above our charge: <strong>1</strong> settlement" in page.text
    assert "0.009288 EUR" in page.text


async def test_rt37_tasks_billed_without_a_result_are_a_gap_below_the_reservation(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """The provider bills every created task; the price list charges measured keywords only
    (RT-24). A keyword answered "no results" leaves a gap above the charge, within the
    reservation: recorded for reconciliation, the unused reservation released."""
    sim.script("blue shoes", no_data=True)
    sim.place("red shoes", DOMAIN, 1)
    await fund(runtime, tenant, 100)
    schedule = await make_schedule(runtime, tenant)
    before = _gaps("false")

    run = await _run_to_the_end(runtime, schedule.id)

    assert (run.status, run.retrieved, run.no_data) == ("succeeded", 1, 1)
    assert run.provider_cost == Decimal("0.0012")
    assert [(e.kind, e.amount_micros) for e in await _entries(runtime, run.id)] == [
        ("reservation", 1032),
        ("settlement", 516),
        ("release", 516),
        ("reconcile", 516),
    ]
    assert _gaps("false") == before + 1


async def test_rt37_no_gap_no_reconciliation_entry(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    sim.place("red shoes", DOMAIN, 1)
    await fund(runtime, tenant, 100)
    schedule = await make_schedule(runtime, tenant, depth="top100")
    run = await _run_to_the_end(runtime, schedule.id)
    assert run.provider_cost == Decimal("0.0093")  # 2 × (0.0006 + 9 × 0.75 × 0.0006)
    assert [e.kind for e in await _entries(runtime, run.id)] == ["reservation", "settlement"]


async def test_rt37_subcent_settlements_add_up_exactly_over_1000_runs(
    runtime: Runtime, tenant: Tenant
) -> None:
    """1,000 child runs of 1 to 7 keywords (top 10, standard) reserved and settled one by one
    through :func:`ledger.settle`: every charge is a fraction of a cent, and the settled total is
    exactly the sum of the price list's amounts — no run rounded up to a cent (which would
    charge 10 EUR for 1,000 single-keyword runs costing 0.516 EUR)."""
    await fund(runtime, tenant, 100_000)
    schedule = await make_schedule(runtime, tenant)
    prices = PriceList.from_settings(runtime.settings.ranktracking)
    now = runtime.clock.now()
    counts = [1 + (i * 5) % 7 for i in range(1000)]  # deterministic, 1..7
    async with runtime.db.write() as uow:
        s = uow.session
        request = Request(
            schedule_id=schedule.id,
            workspace_id=tenant.workspace_id,
            trigger=MANUAL,
            queue="standard",
            due_at=None,
            created_at=now,
        )
        s.add(request)
        await s.flush()
        runs = [
            Run(
                workspace_id=tenant.workspace_id,
                schedule_id=schedule.id,
                request_id=request.id,
                data_type="serp",
                device="desktop",
                queue="standard",
                depth=10,
                keywords=[f"k{j}" for j in range(n)],
                status="running",
                requested=n,
                retrieved=n,
                no_data=0,
                reserved_micros=0,
                reservation_state="none",
                polls=0,
                created_at=now,
                updated_at=now,
            )
            for n in counts
        ]
        s.add_all(runs)
        await s.flush()
        balance = await ledger.lock_balance(s, tenant.organisation_id, now)
        await ledger.reserve_many(
            s,
            {tenant.organisation_id: balance},
            [
                ledger.Hold(
                    run=run,
                    organisation_id=tenant.organisation_id,
                    amount_micros=prices.serp_micros(
                        n, depth=10, queue="standard", device="desktop"
                    ),
                )
                for run, n in zip(runs, counts, strict=True)
            ],
            now,
        )
        run_ids = [r.id for r in runs]

    charged = []
    for run_id, n in zip(run_ids, counts, strict=True):
        async with runtime.db.write() as uow:
            run = await uow.session.get(Run, run_id)
            assert run is not None
            charge = billable_micros(
                prices,
                data_type="serp",
                billable=n,
                queue="standard",
                depth=10,
                device="desktop",
                packages=[],
            )
            assert 0 < charge < 10_000  # each a fraction of a cent
            settled = await ledger.settle(
                uow.session,
                run,
                organisation_id=tenant.organisation_id,
                charge_micros=charge,
                now=now,
                provider_cost=Decimal("0.0006") * n,
                provider_micros=prices.provider_micros(Decimal("0.0006") * n),
            )
            assert settled is not None
            assert settled.gap_micros == 0
            charged.append(settled.charged_micros)

    expected_eur = sum((Decimal("0.0006") * Decimal("0.86") * n for n in counts), Decimal(0))
    assert Decimal(sum(charged)) / 1_000_000 == expected_eur == Decimal("2.064516")
    async with runtime.db.read() as session:
        view = await ledger.balance_of(session, tenant.organisation_id)
        in_ledger = await session.scalar(
            select(func.sum(LedgerEntry.amount_micros)).where(LedgerEntry.kind == "settlement")
        )
        gaps = await ledger.reconciliation_total(session, tenant.organisation_id)
    assert in_ledger == view.settled_micros == sum(charged) == 2_064_516
    assert view.reserved_micros == 0
    assert view.available_micros == 1_000_000_000 - 2_064_516
    assert await available_micros(runtime, tenant) == view.available_micros
    assert (gaps.entries, gaps.micros) == (0, 0)


async def test_rt19_the_wizard_estimate_shows_exact_parts_and_a_cost_rounded_up(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    from tests.platform.conftest import post_form, sign_in

    await sign_in(client, tenant.email, tenant.password)
    r = await post_form(
        client,
        "/ui/ranktracking/new",
        "/ui/ranktracking/estimate",
        name="x",
        data_type="serp",
        frequency="daily",
        source="selection",
        keywords="red shoes\nblue shoes",
        depth="top10",
        location_code="2840",
        language_code="en",
        domain=DOMAIN,
        device_desktop="on",
        device_mobile="on",
    )
    assert r.status_code == 200, r.text
    # 2 keywords × 0.000516 EUR per device: 0.002064 EUR a run, shown as 0.01
    assert "desktop 0.001032, mobile 0.001032" in r.text
    assert '<td data-k="cost_per_run">0.01 EUR' in r.text
