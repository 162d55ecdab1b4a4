"""Position tracking in a real browser: a list, the wizard with its live estimate, a two-device
baseline going from dispatching to succeeded, the log and health chart, results with position over
time, and the balance with its ledger."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Run
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.factories import (  # noqa: F401 - the simulator fixtures
    DOMAIN,
    served_sim,
    sim,
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_wizard_baseline_log_results_and_balance(
    signed_in_page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    page = signed_in_page
    sim.place("trail shoes", DOMAIN, 3)
    sim.place("rain jacket", DOMAIN, None)

    # The balance page: top up through the form.
    await page.goto(f"{live_url}/ui/ranktracking/balance")
    await page.fill("input[name=amount_eur]", "10")
    await page.click("#rt-top-up")
    await page.wait_for_selector("#rt-notice")
    assert "10.00 EUR" in await page.locator("#rt-available").inner_text()

    # A keyword list.
    await page.goto(f"{live_url}/ui/ranktracking/lists")
    await page.fill("#rt-new-list input[name=name]", "Gear")
    await page.fill(
        "#rt-new-list textarea[name=keywords]", "Trail Shoes\nrain jacket\ntrail  shoes\n"
    )
    await page.click("#rt-new-list button[type=submit]")
    await page.wait_for_selector("#rt-keywords")
    assert await page.locator("#rt-keywords li").all_inner_texts() == ["trail shoes", "rain jacket"]

    # The wizard, with its live estimate.
    await page.goto(f"{live_url}/ui/ranktracking/new")
    await page.fill("input[name=name]", "Gear positions")
    await page.select_option("select[name=list_id]", label="Gear (2)")
    await page.fill("input[name=domain]", DOMAIN)
    await page.check("input[name=device_mobile]")
    await page.select_option("select[name=frequency]", "daily")
    # The live estimate follows the form (htmx); expect() waits for the latest refresh.
    figures = page.locator("#rt-estimate-figures")
    await expect(figures.locator("td[data-k=keyword_count]")).to_have_text("2")
    await expect(figures.locator("td[data-k=cost_per_run]")).to_contain_text(
        "0.01 EUR"
    )  # 2 × 2 × 0.000516 EUR, shown rounded up
    await page.click("#rt-wizard button[type=submit]")
    await page.wait_for_selector("#rt-notice")
    assert "Baseline: 2 child runs launched" in await page.locator("#rt-notice").inner_text()
    groups = page.locator("#rt-log tbody.rt-group")
    assert await groups.count() == 1
    assert await groups.first.locator("tr").count() == 2  # the two-device group
    assert "dispatching" in await groups.first.inner_text()
    assert await page.locator("#rt-health rect.bar").count() == 1

    # The worker posts to the provider simulator and collects the answers.
    client = RankTrackingDeps.of(runtime).serp
    async with runtime.db.read() as session:
        from sqlalchemy import select

        run_ids = list((await session.execute(select(Run.id))).scalars())
    for run_id in run_ids:
        await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
        await poll_ready(RankTrackingDeps.of(runtime), client)
    await page.reload()
    assert (await groups.first.inner_text()).count("succeeded") == 2
    assert await page.locator("#rt-health rect.bar.succeeded").count() == 1
    # The latest results are the paged positions table (no second list of them below it).
    assert await page.locator("#rt-results").count() == 0
    positions = await page.locator("#rt-positions-table td.rt-latest").all_inner_texts()
    assert [p.strip() for p in positions] == ["not in top 10", "not in top 10", "3", "3"]

    # Position over time for one keyword.
    await page.locator("#rt-positions-table a:text('trail shoes')").first.click()
    await page.wait_for_function("document.getElementById('rt-history').uplot !== undefined")
    labels = await page.evaluate(
        "document.getElementById('rt-history').uplot.series.slice(1).map((s) => s.label)"
    )
    assert labels == ["desktop", "mobile"]

    # Pause from the schedule page: the status changes and says so.
    await page.go_back()
    await page.click("#rt-pause")
    await page.wait_for_selector("#rt-notice")
    assert await page.locator("#rt-status").inner_text() == "paused_user"

    # The overview lists it; the ledger shows the reservations and settlements.
    await page.goto(f"{live_url}/ui/ranktracking")
    assert "Gear positions" in await page.locator("#rt-schedules").inner_text()
    await page.goto(f"{live_url}/ui/ranktracking/balance")
    kinds = await page.locator("#rt-ledger tbody tr td:nth-child(3)").all_inner_texts()
    assert kinds.count("reservation") == 2
    assert kinds.count("settlement") == 2
    assert kinds[-1] == "topup"
