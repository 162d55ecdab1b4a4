"""The rule log's charts after a first run, in a real headless Chromium (AR-49; static/charts.js):
one run's single time gets a time axis of an hour either side (not uPlot's automatic range, which
runs years ahead and squeezes the budget points against the left edge), and runs minutes apart
get tick labels that all differ (not the same hour repeated)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.adrules.schemas import IncreaseBudget, MetricValueCondition, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Setup,
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
from tests.factories import Tenant
from tests.harness.clock import manual_clock

pytestmark = pytest.mark.browser

__all__ = ["graph_server", "settings", "world"]

AXIS = """(selector) => {
  const u = document.querySelector(selector).uplot;
  const xs = u.data[0];
  const left = u.valToPos(xs[0], "x"), right = u.valToPos(xs[xs.length - 1], "x");
  return {
    span: u.scales.x.max - u.scales.x.min,
    first: left / u.bbox.width * devicePixelRatio,
    last: right / u.bbox.width * devicePixelRatio,
    ticks: u.axes[0]._values,
  };
}"""


async def _setup(runtime: Runtime, tenant: Tenant, world: GraphWorld) -> Setup:
    await store_token(runtime, tenant.workspace_id, JOB_TOKEN)
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaign("act_1001", SimCampaign(id="41", name="Alpha", daily_budget=5000))
    task = TaskIn(
        name="Scale",
        conditions=[
            MetricValueCondition(metric="spend", period="today", operator="gt", value=Decimal(1))
        ],
        action=IncreaseBudget(amount=Decimal(10), max=Decimal(200)),
        cooldown="15m",
    )
    return await create_setup(runtime, tenant.workspace_id, tasks=[task], rule_name="Scale rule")


async def _run(runtime: Runtime, world: GraphWorld, setup: Setup, runs: int) -> None:
    clients = make_clients(world.base_url)
    try:
        for _ in range(runs):
            payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
            await run_account_job(make_deps(runtime, clients), payload)
            manual_clock(runtime).advance(minutes=30)
    finally:
        await clients.aclose()


async def test_ar49_a_first_run_is_charted_on_a_readable_axis_with_distinct_ticks(
    page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    errors = watch_errors(page)
    setup = await _setup(runtime, tenant, world)
    await _run(runtime, world, setup, runs=1)
    await sign_in(page, live_url, tenant.email, tenant.password)

    await page.goto(f"{live_url}/ui/adrules/log?rule_id={setup.rule_id}")
    for chart in ("#budget-chart", "#run-history-chart"):
        await expect(page.locator(f"{chart} canvas")).to_have_count(1)
        axis = await page.evaluate(AXIS, chart)
        # One time: two hours of axis, the point in the middle, not years with it at the left.
        assert axis["span"] == 2 * 3600, chart
        assert 0.4 < axis["first"] < 0.6, (chart, axis)
        assert len(set(axis["ticks"])) == len(axis["ticks"]), axis["ticks"]

    # Two more runs half an hour apart: every tick of the run history reads differently, and
    # the runs spread over the plot.
    await _run(runtime, world, setup, runs=2)
    await page.goto(f"{live_url}/ui/adrules/log?rule_id={setup.rule_id}")
    await expect(page.locator("#run-history-chart canvas")).to_have_count(1)
    axis = await page.evaluate(AXIS, "#run-history-chart")
    assert len(axis["ticks"]) >= 3
    assert len(set(axis["ticks"])) == len(axis["ticks"]), axis["ticks"]
    assert axis["first"] < 0.2
    assert axis["last"] > 0.8
    budget = await page.evaluate(AXIS, "#budget-chart")
    assert budget["first"] < 0.2
    assert budget["last"] > 0.8
    assert errors == []
