"""Keywords from Search Console and tags in a real browser (RT-68 to RT-71): from a schedule
measured three weeks through the SERP simulator, the import page lists the simulator's property,
previews its queries with their figures (the untracked ones ticked), adds them with a tag; then
two keywords of the positions table are tagged, the table is filtered by the tag, and the per-tag
charts are drawn — without a console error."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from app.runtime import Runtime
from app.sandbox.search_console import QueryRow, SearchConsoleSandbox
from app.sandbox.serp import SerpSimulator
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.engines.ranktracking.factories import (  # noqa: F401 - the simulator fixtures
    gsc,
    seeded_schedule,
    served_gsc,
    served_sim,
    sim,
    store_google_key,
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser

SITE = "sc-domain:acme-shop.com"


async def test_rt68_to_rt71_import_tag_filter_and_chart_by_tag(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
    gsc: SearchConsoleSandbox,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    # Seeded first: the weeks it moves the clock by would outlast a session signed in before.
    schedule = await seeded_schedule(runtime, tenant, sim)
    await store_google_key(
        runtime, tenant, gsc.google.new_service_account("rt@acme-shop.iam.gserviceaccount.com")
    )
    gsc.add_property(SITE)
    day = (runtime.clock.now().date() - timedelta(days=5)).isoformat()
    gsc.add_rows(
        SITE,
        [
            QueryRow("running shoes", day, 120, 2400, 3.2),
            QueryRow("red shoes", day, 80, 1000, 2.0),
            QueryRow("trail shoes", day, 15, 600, 8.4),
            QueryRow("shoe laces", day, 1, 20, 31.0),
        ],
    )
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")

    # RT-68: the import page, its property and a preview above a minimum of impressions.
    await page.click("#rt-import-gsc")
    await page.wait_for_selector("#rt-gsc-form")
    assert await page.locator("#rt-gsc-property").input_value() == SITE
    await page.fill("input[name=min_impressions]", "100")
    await page.click("#rt-gsc-preview")
    await page.wait_for_selector("#rt-gsc-queries")
    rows = page.locator("tr.rt-gsc-row")
    assert await rows.evaluate_all("rs => rs.map(r => r.dataset.keyword)") == [
        "running shoes",
        "red shoes",
        "trail shoes",
    ]
    running = page.locator("tr.rt-gsc-row[data-keyword='running shoes']")
    cells = await running.locator("td.rt-num").all_inner_texts()
    assert [c.strip() for c in cells] == ["120", "2400", "5.0 %", "3.2"]
    assert await running.locator("input[type=checkbox]").is_checked()
    red = page.locator("tr.rt-gsc-row[data-keyword='red shoes']")
    assert not await red.locator("input[type=checkbox]").is_checked()  # tracked already

    # RT-69: the ticked queries join the schedule, tagged.
    await page.fill("#rt-gsc-tag", "From GSC")
    await page.click("#rt-gsc-submit")
    await page.wait_for_selector("#rt-notice")
    assert (await page.locator("#rt-notice").inner_text()).strip() == (
        "Added 2 keywords from Search Console, tagged “from gsc”"
    )

    # RT-70: two keywords of the positions table tagged from their checkboxes.
    for keyword in ("red shoes", "green shoes"):
        await page.check(
            f"tr.rt-row[data-keyword='{keyword}'][data-device=desktop] input.rt-select"
        )
    await page.fill("#rt-tag-name", "Colours")
    await page.click("#rt-tag-add")
    await page.wait_for_selector("#rt-notice")
    assert (await page.locator("#rt-notice").inner_text()).strip() == (
        "Tag “colours” added to 2 keywords"
    )
    tagged = page.locator("tr.rt-row[data-device=mobile] a.rt-tag[data-tag=colours]")
    assert await tagged.count() == 2

    # RT-71: the table filtered by the tag, the filter kept in the sorting links.
    await page.select_option("#rt-tag-filter", "colours")
    await page.click("#rt-filter-apply")
    await page.wait_for_url("**tag=colours**")
    keywords = await page.locator("#rt-positions-table tbody tr.rt-row").evaluate_all(
        "rs => [...new Set(rs.map(r => r.dataset.keyword))]"
    )
    assert sorted(keywords) == ["green shoes", "red shoes"]
    sort_link = await page.locator("#rt-positions-table th a[data-sort=position]").get_attribute(
        "href"
    )
    assert sort_link is not None
    assert "tag=colours" in sort_link
    assert (await page.locator("#rt-trends-tag").inner_text()).strip() == "colours"

    # The per-tag charts, drawn with a line per tag and device.
    await page.wait_for_selector("#rt-tag-chart-2 .u-legend")
    legend = await page.locator("#rt-tag-chart-2 .u-legend").inner_text()
    assert "colours · desktop" in legend
    assert "from gsc · mobile" in legend
    assert errors == []
