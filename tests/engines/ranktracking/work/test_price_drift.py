"""Money alarms that mean something (RT-53): the provider's bill is compared with the price list
per billed unit — tasks without a result included — so matching prices raise nothing, and a unit
price drifting beyond ``RT_COST_TOLERANCE_PERCENT`` either way is a feed row a person can read."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Activity, LedgerEntry, Run
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.runtime import Runtime
from app.sandbox.serp import SerpPrices, SerpSimulator
from tests.engines.ranktracking.factories import KEYWORD_DATA, fund, make_list, make_schedule
from tests.factories import Tenant


async def _run_to_the_end(runtime: Runtime, schedule_id: int) -> list[Run]:
    deps = RankTrackingDeps.of(runtime)
    launch = await admit_and_send(
        deps, schedule_id, trigger=MANUAL, queue="standard", now=runtime.clock.now()
    )
    for run_id in launch.run_ids:
        await post_impl(deps, deps.serp, run_id, final_attempt=False)
    await poll_ready(deps, deps.serp)
    async with runtime.db.read() as session:
        runs = [await session.get(Run, run_id) for run_id in launch.run_ids]
    assert all(r is not None for r in runs)
    return [r for r in runs if r is not None]


async def _alarms(runtime: Runtime) -> list[Activity]:
    async with runtime.db.read() as session:
        return list(
            (
                await session.execute(select(Activity).where(Activity.kind == "reconciliation"))
            ).scalars()
        )


async def test_rt53_keywords_without_results_at_matching_prices_raise_nothing(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-53: 10 of 12 keywords answer "no results" on two devices: the provider bills all 24
    checks, the price list charges the 4 measured (RT-24). The unit prices match, so no alarm;
    the ledger still records the uncharged part so that settlements plus reconciliation add up
    to the provider's bill × rate, to the micro-euro."""
    keywords = [f"kw {n}" for n in range(12)]
    for keyword in keywords[:10]:
        sim.script(keyword, no_data=True)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(
        runtime, tenant, keywords=keywords, devices=["desktop", "mobile"]
    )
    runs = await _run_to_the_end(runtime, schedule.id)

    assert [(r.retrieved, r.no_data) for r in runs] == [(2, 10), (2, 10)]
    assert await _alarms(runtime) == []
    async with runtime.db.read() as session:
        sums = dict(
            (
                await session.execute(
                    select(LedgerEntry.kind, func.sum(LedgerEntry.amount_micros))
                    .where(LedgerEntry.kind.in_(("settlement", "reconcile")))
                    .group_by(LedgerEntry.kind)
                )
            ).all()
        )
    bill = sum((r.provider_cost or Decimal(0) for r in runs), Decimal(0))
    assert bill == Decimal("0.0144")  # 24 checks × 0.0006 USD
    assert sums["settlement"] + sums["reconcile"] == int(bill * Decimal("0.86") * 1_000_000)


@pytest.mark.parametrize(
    ("page_price", "code", "words"),
    [
        ("0.00063", "provider_price_above_list", "5.0% above"),
        ("0.00057", "provider_price_below_list", "5.0% below"),
        ("0.000606", None, None),
    ],
    ids=["price-rise", "over-charging", "within-tolerance"],
)
async def test_rt53_a_unit_price_drift_beyond_the_tolerance_is_flagged_either_way(
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,
    page_price: str,
    code: str | None,
    words: str | None,
) -> None:
    """RT-53: at a tolerance of 2 %, a provider price 5 % above the list (the organisation
    absorbs it) and 5 % below it (customers over-charged) each raise one readable feed row; 1 %
    raises none. A keyword without results in the same run does not move the unit price."""
    sim.prices = SerpPrices(serp_page_standard=Decimal(page_price))
    sim.script("blue shoes", no_data=True)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    (run,) = await _run_to_the_end(runtime, schedule.id)

    alarms = await _alarms(runtime)
    if code is None:
        assert alarms == []
        return
    (alarm,) = alarms
    assert (alarm.code, alarm.run_id) == (code, run.id)
    assert words is not None
    assert words in alarm.message
    assert f"{Decimal(page_price).normalize():f} USD per check (2 billed" in alarm.message
    assert "the price list 0.0006 USD" in alarm.message
    if code == "provider_price_below_list":
        assert "customers are charged more than the provider bills" in alarm.message


async def test_rt53_the_tolerance_is_a_setting(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-53: ``RT_COST_TOLERANCE_PERCENT`` at 10: a 5 % drift raises nothing."""
    rt = dataclasses.replace(runtime.settings.ranktracking, cost_tolerance_percent=Decimal(10))
    runtime.settings = dataclasses.replace(runtime.settings, ranktracking=rt)
    sim.prices = SerpPrices(serp_page_standard=Decimal("0.00063"))
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    await _run_to_the_end(runtime, schedule.id)
    assert await _alarms(runtime) == []


async def test_rt53_keyword_data_is_charged_what_the_provider_bills(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-53: a keyword-data task is charged the standard method's published price per task,
    which is what the provider bills: the settlement equals the bill × rate and nothing is
    flagged (it was charged 1.5 × the bill, the live method's price)."""
    await fund(runtime, tenant, 1000)
    words = await make_list(runtime, tenant, ["red shoes", "blue shoes"])
    schedule = await make_schedule(runtime, tenant, list_id=words.id, **KEYWORD_DATA)
    (run,) = await _run_to_the_end(runtime, schedule.id)
    assert run.provider_cost == Decimal("0.05")
    assert run.settled_micros == 43_000  # 0.05 USD × 0.86
    assert await _alarms(runtime) == []
