"""The schedule page's alert and report forms, the competitors beside the tracked domain in the
schedule charts with who gained and who lost, and the balance over time — in a real browser,
without typing JSON, and without console errors (issue 15 items 3, 6, 7; issue 16 item 5)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.engines.ranktracking import ledger
from app.engines.ranktracking.alert_models import AlertRule
from app.engines.ranktracking.reports.competitors import set_competitors
from app.engines.ranktracking.schedules.lookup import lock_schedule
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.e2e.test_ranktracking_reports_browser import chart
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


async def test_alert_and_report_forms(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    assert "No alert yet." in await page.locator("#rt-alert-rules").inner_text()

    # A typo in an address: the form comes back with the message, named by its label, and
    # what was typed.
    form = page.locator("#rt-alert-form")
    await form.locator("input[name=name]").fill("Into the top 3")
    await form.locator("select[name=kind]").select_option("enters_top")
    await form.locator("input[name=threshold]").fill("3")
    await form.locator("textarea[name=recipients]").fill("seo@example.com, not-an-address")
    await page.click("#rt-alert-save")
    await page.wait_for_selector("#rt-alert-errors")
    assert "E-mail addresses" in await page.locator("#rt-alert-errors").inner_text()
    assert await page.locator("#rt-alert-form input[name=name]").input_value() == "Into the top 3"
    await page.locator("#rt-alert-form textarea[name=recipients]").fill("seo@example.com")
    await page.click("#rt-alert-save")
    await page.wait_for_selector("#rt-notice")
    assert "enters the top 3" in await page.locator("#rt-notice").inner_text()
    row = page.locator("#rt-alert-rules tr.rt-alert-rule")
    assert await row.count() == 1
    assert "seo@example.com" in await row.inner_text()

    # Edit it into a signed webhook, then switch it off.
    await row.locator("a").click()
    await page.wait_for_selector("#rt-alert-form")
    await page.select_option("#rt-alert-form select[name=channel]", "webhook")
    await page.fill("#rt-alert-form input[name=url]", "https://hooks.example.com/positions")
    await page.click("#rt-alert-save")
    await page.wait_for_selector("#rt-alert-errors")
    assert "Signing secret" in await page.locator("#rt-alert-errors").inner_text()
    await page.fill("#rt-alert-form input[name=secret]", "a-secret-of-24-characters")
    await page.uncheck("#rt-alert-form input[name=enabled]")
    await page.click("#rt-alert-save")
    await page.wait_for_selector("#rt-notice")
    assert "hooks.example.com" in await row.inner_text()
    assert "off" in await row.inner_text()
    async with runtime.db.read() as session:
        rule = await session.scalar(select(AlertRule))
    assert rule is not None
    assert (rule.channel, rule.enabled, rule.threshold) == ("webhook", False, 3)
    assert rule.sealed_secret is not None
    assert "a-secret-of-24-characters" not in rule.sealed_secret

    # The monthly report.
    await page.select_option("#rt-report-form select[name=period]", "monthly")
    await page.fill("#rt-report-form input[name=recipients]", "boss@example.com")
    await page.check("#rt-report-form input[name=enabled]")
    await page.click("#rt-report-save")
    await page.wait_for_selector("#rt-notice")
    assert "Monthly report on" in await page.locator("#rt-notice").inner_text()
    assert "2026-04-01 00:00 UTC" in await page.locator("#rt-report-next").inner_text()

    # Deleting the alert.
    page.on("dialog", lambda dialog: dialog.accept())
    await row.locator("button").click()
    await page.wait_for_selector("#rt-notice")
    assert "No alert yet." in await page.locator("#rt-alert-rules").inner_text()
    assert errors == []


async def test_competitors_beside_the_domain_in_the_schedule_charts(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    async with runtime.db.write() as uow:
        locked = await lock_schedule(uow.session, tenant.workspace_id, schedule.id)
        await set_competitors(uow.session, locked, ["rival.com"], runtime.clock.now())
    sim.place("red shoes", "rival.com", 1)
    sim.place("blue shoes", "rival.com", 4)
    await measure(runtime, sim, schedule.id, PLAN[0])
    runtime.clock.advance(days=7)  # type: ignore[attr-defined]
    sim.place("red shoes", "rival.com", 3)
    await measure(runtime, sim, schedule.id, PLAN[1])
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")

    visibility = await chart(page, "rt-chart-1")
    assert visibility["labels"] == [
        "desktop",
        "mobile",
        "rival.com (desktop)",
        "rival.com (mobile)",
    ]
    # rival.com: positions 1, 4 and beyond the depth, then 3, 4 and beyond.
    assert visibility["values"][2] == [43.48, 23.43]
    assert visibility["values"][0] == [20.89, 35.63]
    assert all(p and p[1] for row in visibility["drawn"] for p in row)
    assert [p[0] for p in visibility["drawn"][0]] == [p[0] for p in visibility["drawn"][2]]
    assert "rival.com (desktop)" in visibility["legend"]
    average = await chart(page, "rt-chart-2")
    assert average["values"][2] == [2.5, 3.5]

    rivals = page.locator("#rt-rivals tbody tr")
    first = rivals.first
    assert await first.get_attribute("data-domain") == "acme-shop.com"
    assert await first.get_attribute("data-trend") == "gained"
    rival_desktop = page.locator("#rt-rivals tr[data-domain='rival.com'][data-device=desktop]")
    assert await rival_desktop.get_attribute("data-trend") == "lost"
    assert "-20.05" in await rival_desktop.inner_text()
    assert errors == []


async def test_balance_over_time_chart(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    await fund(runtime, tenant, 10_000)  # 100 EUR on Monday 2 March
    schedule = await make_schedule(runtime, tenant, keywords=KEYWORDS, devices=["desktop"])
    runtime.clock.advance(days=3)  # type: ignore[attr-defined]
    await measure(runtime, sim, schedule.id, PLAN[0])
    async with runtime.db.read() as session:
        available = await ledger.ledger_available(session, tenant.organisation_id)
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking/balance")
    await page.wait_for_function("document.getElementById('rt-balance-chart').uplot !== undefined")
    state = await page.evaluate(
        """() => {
          const u = document.getElementById('rt-balance-chart').uplot;
          return {x: u.data[0], values: u.data[1], labels: u.series.slice(1).map((s) => s.label)};
        }"""
    )
    assert state["labels"] == ["available (EUR)"]
    assert len(state["x"]) == 4  # one point a day, from the top-up's day to today
    assert state["values"][:3] == [100.0, 100.0, 100.0]
    assert state["values"][3] == available / 1_000_000
    assert state["values"][3] < 100.0
    assert errors == []
