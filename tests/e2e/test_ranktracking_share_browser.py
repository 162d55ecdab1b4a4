"""A shared report link in a real browser (RT-113, RT-116, RT-119): an admin uploads the
workspace's logo, makes a link on the schedule page, a browser without any session opens it and
sees the workspace's name and logo, the positions table and the charts (no console error under
the Content-Security-Policy); once revoked, the same address answers 404."""

from __future__ import annotations

from typing import Any

import pytest

from app.engines.ranktracking.reports.png_chart import Series, line_chart
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.e2e.test_every_page_browser import WIDTHS, audit_context, audit_page
from tests.engines.ranktracking.factories import (
    KEYWORDS,
    PLAN,
    fund,
    make_schedule,
    measure,
    served_sim,  # noqa: F401 - the simulator fixtures
    sim,  # noqa: F401
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser

LOGO = line_chart([Series((20, 90, 200), [1.0, 2.0, 1.5])], low=0.0, high=3.0, inverted=False)


async def test_rt113_share_a_report_open_it_without_a_session_and_revoke_it(
    page: Any,
    browser: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, name="Client shoes", keywords=KEYWORDS)
    await measure(runtime, sim, schedule.id, PLAN[0])
    runtime.clock.advance(days=1)  # type: ignore[attr-defined]
    await measure(runtime, sim, schedule.id, PLAN[1])
    await sign_in(page, live_url, tenant.email, tenant.password)

    # The logo, on the workspace's settings page.
    await page.goto(f"{live_url}/ui/workspace")
    await page.set_input_files(
        "#logo-file", files=[{"name": "logo.png", "mimeType": "image/png", "buffer": LOGO}]
    )
    await page.click("#logo-form button[type=submit]")
    await page.wait_for_selector("#workspace-logo")

    # Share report: the link is shown once.
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    assert "No link yet." in await page.locator("#rt-share-links").inner_text()
    await page.select_option("#rt-share-days", "7")
    await page.click("#rt-share-create")
    await page.wait_for_selector("#rt-share-url")
    url = (await page.locator("#rt-share-url").inner_text()).strip()
    path = "/" + url.split("/", 3)[3]
    assert path.startswith("/shared/ranktracking/swr_")

    # A fresh browser: no cookie, no session.
    context = await browser.new_context()
    try:
        visitor = await context.new_page()
        visitor_errors = watch_errors(visitor)
        answer = await visitor.goto(f"{live_url}{path}")
        assert answer is not None
        assert answer.status == 200
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert await visitor.locator("#rt-report-workspace").inner_text() == "Acme main"
        assert "Client shoes" in await visitor.locator("h1").inner_text()
        logo = visitor.locator('img[alt$="logo"]')
        assert await logo.count() == 1
        assert await logo.evaluate("i => i.complete && i.naturalWidth > 0")
        table = await visitor.locator("#rt-shared-positions").inner_text()
        for keyword in KEYWORDS:
            assert keyword in table
        charts = visitor.locator('img[alt^="Average position"], img[alt^="Visibility"]')
        assert await charts.count() == 2
        assert await visitor.locator("script").count() == 0
        assert visitor_errors == []
        audited = await audit_context(browser)
        try:
            for width in WIDTHS:  # axe, a phone's width, no console error or failed request
                assert await audit_page(await audited.new_page(), f"{live_url}{path}", width) == []
        finally:
            await audited.close()

        # Revoke it (with the confirmation), and the same address is a 404.
        await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
        row = page.locator("#rt-share-links tr[data-link-id]")
        assert await row.count() == 1
        assert "active" in await row.inner_text()
        page.once("dialog", lambda dialog: dialog.accept())
        await row.locator("button").click()
        await page.wait_for_selector("#rt-share-links .badge.bad")
        assert "revoked" in await page.locator("#rt-share-links").inner_text()
        gone = await visitor.goto(f"{live_url}{path}")
        assert gone is not None
        assert gone.status == 404
        assert "Report not found" in await visitor.locator("h1").inner_text()
        assert "Client shoes" not in await visitor.content()
    finally:
        await context.close()
    assert errors == []
