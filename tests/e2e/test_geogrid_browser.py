"""The Local grids page in a real Chromium (RT-127): a scan run from the form at a phone's width,
its heat map read as text cell by cell, no page-level horizontal scroll at 375 px, no axe-core
violation, no console error and no failed request (the page has no script of its own)."""

from __future__ import annotations

from typing import Any

import pytest

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.e2e.test_every_page_browser import WIDTHS, audit_context, audit_page
from tests.engines.ranktracking.factories import (
    fund,
    served_sim,  # noqa: F401 - the simulator fixtures
    sim,  # noqa: F401
)
from tests.engines.ranktracking.local.helpers import PARIS, PLACE_ID, finish, place
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_rt127_run_a_grid_and_read_its_heat_map_on_a_phone(
    page: Any,
    browser: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    """RT-127: at 375 px the form runs a 5×5 Local Finder grid; once collected every cell shows
    its rank and is labelled with its row and column; the page passes the audit at both widths."""
    errors = watch_errors(page)
    place(sim, 2)
    await fund(runtime, tenant, 100)
    await page.set_viewport_size({"width": 375, "height": 800})
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking")
    await page.click("text=Local grids")
    await page.fill("input[name=keyword]", "boulangerie")
    await page.fill("input[name=place_id]", PLACE_ID)
    await page.fill("input[name=latitude]", str(PARIS[0]))
    await page.fill("input[name=longitude]", str(PARIS[1]))
    await page.select_option("select[name=size]", "5")
    await page.select_option("select[name=engine]", "local_finder")
    await page.fill("input[name=language_code]", "fr")
    await page.click("#rt-local-run")
    await page.wait_for_selector("#rt-heatmap")
    scan_url = page.url
    await finish(runtime, int(scan_url.rsplit("/", 1)[1]))
    await page.goto(scan_url)

    cells = page.locator("#rt-heatmap tbody td")
    assert await cells.count() == 25
    centre = cells.nth(12)
    assert (await centre.locator("[aria-hidden=true]").inner_text()) == "2"
    assert (await centre.locator(".sr-only").inner_text()) == "Row 3, column 3: rank 2"
    assert (await cells.nth(0).locator("[aria-hidden=true]").inner_text()) == "5"
    assert await page.locator("#rt-local-status").inner_text() == "done"
    overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0
    assert errors == []

    audited = await audit_context(browser)
    try:
        signed_in = await audited.new_page()
        await sign_in(signed_in, live_url, tenant.email, tenant.password)
        for width in WIDTHS:
            for path in ("/ui/ranktracking/local", scan_url.split(live_url, 1)[1]):
                assert await audit_page(signed_in, f"{live_url}{path}", width) == []
    finally:
        await audited.close()
