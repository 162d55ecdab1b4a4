"""What a run's end leaves in the activity feed (RT-39): its settlement, its failure, and a
provider cost above the charge, each pinned to its kind, code, message and fields."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import select

from app.clock import ManualClock
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Activity
from app.engines.ranktracking.schedules.manual_runs import run_now
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.runtime import Runtime
from app.sandbox.serp import SerpPrices, SerpSimulator
from tests.engines.ranktracking.factories import DOMAIN, fund, make_schedule, principal
from tests.factories import Tenant


async def _run_entries(
    runtime: Runtime, tenant: Tenant, schedule_id: int, run_id: int, at: datetime
) -> list[tuple[str, str | None, str]]:
    """The run's entries as (kind, code, message), each checked to name the run, its schedule
    and workspace, at ``at``."""
    async with runtime.db.read() as session:
        rows = list(
            (
                await session.execute(
                    select(Activity).where(Activity.run_id.is_not(None)).order_by(Activity.id)
                )
            ).scalars()
        )
    assert {(a.workspace_id, a.schedule_id, a.run_id, a.created_at) for a in rows} == {
        (tenant.workspace_id, schedule_id, run_id, at)
    }
    return [(a.kind, a.code, a.message) for a in rows]


async def _post(runtime: Runtime, tenant: Tenant, schedule_id: int) -> int:
    deps = RankTrackingDeps.of(runtime)
    (run_id,) = (await run_now(deps, principal(tenant), schedule_id, "standard")).run_ids
    await post_impl(deps, deps.serp, run_id, final_attempt=False)
    return run_id


async def test_a_settled_run_and_its_provider_cost_above_the_reservation(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    sim.prices = SerpPrices(serp_page_standard=Decimal("0.006"))
    sim.place("red shoes", DOMAIN, 3)
    sim.place("blue shoes", DOMAIN, 8)
    await fund(runtime, tenant, 1)
    schedule = await make_schedule(runtime, tenant)
    run_id = await _post(runtime, tenant, schedule.id)
    await poll_ready(RankTrackingDeps.of(runtime), RankTrackingDeps.of(runtime).serp)
    assert await _run_entries(runtime, tenant, schedule.id, run_id, clock.now()) == [
        (
            "reconciliation",
            "provider_price_above_list",
            f"run {run_id} (desktop): the provider billed 0.006 USD per check (2 billed, "
            "0.012000 USD), the price list 0.0006 USD: 900.0% above (tolerance 2%); the price "
            "list is behind: the difference is not charged. Check the provider's prices and "
            "RT_EUR_PER_USD. Charged 0.001032 EUR",
        ),
        (
            "run_settled",
            None,
            f"run {run_id} (desktop) succeeded: 2/2 measured, 0.001032 EUR charged",
        ),
    ]


async def test_a_failed_run_is_settled_then_recorded_as_failed(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    sim.inject_status("serp.task_post", 40200)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    run_id = await _post(runtime, tenant, schedule.id)
    assert await _run_entries(runtime, tenant, schedule.id, run_id, clock.now()) == [
        (
            "run_settled",
            None,
            f"run {run_id} (desktop) failed: 0/2 measured, 0.000000 EUR charged",
        ),
        (
            "run_failed",
            "provider_payment_required",
            f"run {run_id} (desktop) failed: provider_payment_required",
        ),
    ]
