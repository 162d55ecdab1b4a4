"""AR-26 the backtest page in a real headless Chromium: from the rule's page, the Backtest form
over a known past draws a timeline chart per object the rule would have acted on (the vendored
uPlot, no inline script) and lists the would-be actions — without a console error."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.engines.adrules.backtest.history import build_history, build_world
from tests.engines.adrules.factories import graph_server, settings, world
from tests.factories import Tenant

pytestmark = pytest.mark.browser

__all__ = ["graph_server", "settings", "world"]

CHARTS = """() => Array.from(document.querySelectorAll('.backtest-chart')).map(el => ({
  x: el.uplot.data[0].length,
  labels: el.uplot.series.slice(1).map(s => s.label),
  budget: el.uplot.data[1],
}))"""


async def test_ar26_the_backtest_form_draws_a_chart_per_object_and_lists_the_actions(
    page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    errors = watch_errors(page)
    build_world(world)
    _, rule_id, _ = await build_history(runtime, tenant.workspace_id)
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/adrules/rules/{rule_id}")
    await page.click("#backtest-rule")
    await page.fill("input[name=since]", "2026-02-20")
    await page.fill("input[name=until]", "2026-02-26")
    await page.click("#backtest-form button[type=submit]")
    await expect(page.locator("#backtest-result")).to_be_visible()
    await expect(page.locator(".backtest-chart canvas")).to_have_count(3)
    charts = await page.evaluate(CHARTS)
    assert charts[0]["x"] == 7
    assert charts[0]["labels"] == ["budget (replayed)", "spend reported", "spend while paused"]
    assert charts[0]["budget"] == [48, 57.6, 57.6, 57.6, 57.6, 69.12, 70]
    await expect(page.locator("tr.backtest-action")).to_have_count(16)
    await expect(page.locator(".spend-paused")).to_have_text("80.00 USD")
    await expect(page.locator("#backtest-estimate")).to_contain_text("old decisions")
    assert world.updates == []
    assert errors == []
