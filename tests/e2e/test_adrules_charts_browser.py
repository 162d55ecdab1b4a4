"""The rule log's charts in a real headless Chromium (AR-25; static/charts.js over the vendored
uPlot): a rule raising two campaigns' budgets over three runs charts each campaign's budget before
and after every change on the run page and on the rule's log, and the runs' executed / skipped /
errors per batch — every point from the records, without a console error."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.adrules.schemas import IncreaseBudget, MetricValueCondition, TaskIn
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    graph_server,
    run_rule,
    settings,
    store_token,
    world,
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser

__all__ = ["graph_server", "settings", "world"]

CHART = """(selector) => {
  const u = document.querySelector(selector).uplot;
  return {x: u.data[0].length, labels: u.series.slice(1).map(s => s.label), data: u.data.slice(1)};
}"""


async def _three_runs(runtime: Runtime, tenant: Tenant, world: GraphWorld) -> tuple[int, list[int]]:
    await store_token(runtime, tenant.workspace_id, JOB_TOKEN)
    task = TaskIn(
        name="Scale",
        conditions=[
            MetricValueCondition(metric="spend", period="today", operator="gt", value=Decimal(1))
        ],
        action=IncreaseBudget(amount=Decimal(10), max=Decimal(200)),
        cooldown="1h",
    )
    campaigns = [
        SimCampaign(id="41", name="Alpha", daily_budget=5000),
        SimCampaign(id="42", name="Beta", daily_budget=8000),
        SimCampaign(id="43", name="Quiet", daily_budget=5000, delivering=False),
    ]
    setup, batches = await run_rule(runtime, world, tenant.workspace_id, task, campaigns, runs=3)
    return setup.rule_id, batches


async def test_ar25_budget_before_after_per_object_and_run_history_are_charted(
    page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    errors = watch_errors(page)
    rule_id, batches = await _three_runs(runtime, tenant, world)
    await sign_in(page, live_url, tenant.email, tenant.password)

    # The run page: the budgets of the objects this run changed, over the rule's executions.
    await page.goto(f"{live_url}/ui/adrules/log/{batches[-1]}")
    await expect(page.locator("#budget-chart canvas")).to_have_count(1)
    chart = await page.evaluate(CHART, "#budget-chart")
    assert chart["x"] == 3
    # Two lines per object changed ("Quiet" never delivered: no change, no line).
    assert sorted(chart["labels"]) == ["Alpha after", "Alpha before", "Beta after", "Beta before"]
    series = dict(zip(chart["labels"], chart["data"], strict=True))
    assert series["Alpha before"] == [50, 55, 60.5]
    assert series["Alpha after"] == [55, 60.5, 66.55]
    assert series["Beta before"] == [80, 88, 96.8]
    assert series["Beta after"] == [88, 96.8, 106.48]
    legend = await page.locator("#budget-chart .u-legend").inner_text()
    assert "Alpha after" in legend
    assert "Beta before" in legend

    # The rule's log: the same budgets, and executed / skipped / errors per run.
    await page.goto(f"{live_url}/ui/adrules/log?rule_id={rule_id}")
    await expect(page.locator("#budget-chart canvas")).to_have_count(1)
    again = await page.evaluate(CHART, "#budget-chart")
    assert dict(zip(again["labels"], again["data"], strict=True)) == series
    await expect(page.locator("#run-history-chart canvas")).to_have_count(1)
    history = await page.evaluate(CHART, "#run-history-chart")
    assert history["labels"] == ["executed", "skipped", "errors"]
    assert history["data"] == [[2, 2, 2], [0, 0, 0], [0, 0, 0]]

    # Every rule's log: the run history, no budget chart (that is per rule).
    await page.goto(f"{live_url}/ui/adrules/log")
    await expect(page.locator("#run-history-chart canvas")).to_have_count(1)
    assert await page.locator("#budget-chart").count() == 0
    await page.click("tr[data-batch] td:nth-child(2) a")
    await page.wait_for_url(f"**rule_id={rule_id}")
    await expect(page.locator("#budget-chart canvas")).to_have_count(1)
    assert errors == []
