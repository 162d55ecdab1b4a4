"""Pages that follow work in progress refresh in place (issue 36, item 5): a schedule's requests
and child runs once a run finishes (RT-77), and the rule log once a rule has run (AR-47), each
without the page being reloaded (a value set on the page's window survives the refresh)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.adrules.schemas import IncreaseBudget, MetricValueCondition, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from app.sandbox.serp import SerpSimulator
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    create_setup,
    entities_from_world,
    graph_server,
    make_clients,
    make_deps,
    make_payload,
    settings,
    store_token,
    world,
)
from tests.engines.ranktracking.factories import (
    DOMAIN,
    collect,
    fund,
    launch,
    make_schedule,
    served_sim,
    sim,
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser

# The simulators' fixtures (Graph API, SERP provider) and settings pointing the app at them.
__all__ = ["graph_server", "served_sim", "settings", "sim", "world"]

# The part polls every 5 seconds while a run is in flight: one period and a margin.
REFRESHED = 15_000


async def _mark(page: Any) -> None:
    """A value only this load of the page holds: a reload would lose it."""
    await page.evaluate("window.sweeplineSameLoad = 'yes'")


async def _same_load(page: Any) -> bool:
    return bool(await page.evaluate("window.sweeplineSameLoad === 'yes'"))


async def test_rt77_the_schedule_log_follows_a_run_to_its_end(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    page = signed_in_page
    sim.place("red shoes", DOMAIN, 4)
    sim.place("blue shoes", DOMAIN, None)
    await fund(runtime, tenant, 1_000)
    schedule = await make_schedule(runtime, tenant)
    run_ids = await launch(runtime, schedule.id)

    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    group = page.locator("#rt-log tbody.rt-group").first
    assert "dispatching" in await group.inner_text()
    assert await page.locator("#rt-runs").get_attribute("hx-trigger") == "every 5s"
    await _mark(page)

    for run_id in run_ids:
        await collect(runtime, run_id)

    await expect(group).to_contain_text("succeeded", timeout=REFRESHED)
    await expect(page.locator("#rt-health rect.bar.succeeded")).to_have_count(1)
    assert await _same_load(page)
    # Nothing in flight any more: the part keeps watching for the next request, less often.
    await expect(page.locator("#rt-runs")).to_have_attribute("hx-trigger", "every 30s")


async def test_ar47_the_rule_log_shows_a_new_run_without_a_reload(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    page = signed_in_page
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaign("act_1001", SimCampaign(id="31", name="Alpha", daily_budget=5000))
    await store_token(runtime, tenant.workspace_id, JOB_TOKEN)
    setup = await create_setup(
        runtime,
        tenant.workspace_id,
        tasks=[
            TaskIn(
                name="Scale",
                conditions=[
                    MetricValueCondition(
                        metric="spend", period="today", operator="gt", value=Decimal(1)
                    )
                ],
                action=IncreaseBudget(amount=Decimal(10), max=Decimal(100)),
            )
        ],
        rule_name="Scale rule",
    )

    await page.goto(f"{live_url}/ui/adrules/log")
    assert "No rule has run yet" in await page.locator("#batches").inner_text()
    await _mark(page)

    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    clients = make_clients(world.base_url)
    try:
        await run_account_job(make_deps(runtime, clients), payload)
    finally:
        await clients.aclose()

    row = page.locator(f"#batches tr[data-batch='{payload.batch_record_id}']")
    await expect(row).to_contain_text("Scale rule", timeout=REFRESHED)
    await expect(row.locator("td").nth(6)).to_have_text("1")  # executed
    # The run-history chart is drawn again from the refreshed part.
    await expect(page.locator("#run-history-chart .uplot")).to_have_count(1)
    assert await _same_load(page)
