"""The keyword page explains its movements in a real browser (RT-71, RT-73, RT-74), from two
measurements seeded through the SERP simulator: the reasons, the results pages side by side, the
features over time, the notes drawn on the position chart (automatic ones, and one written,
changed and deleted from the page); and the balance chart of a single day keeps a span of days
(RT-76). No console errors."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.engines.ranktracking.factories import (  # noqa: F401 - the simulator fixtures
    RIVAL,
    explained_schedule,
    fund,
    served_sim,
    sim,
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser

DAY = 86_400


async def _drawn(page: Any) -> int:
    await page.wait_for_function(
        "document.getElementById('rt-history').getAttribute('data-notes-drawn') !== null"
    )
    return int(await page.get_attribute("#rt-history", "data-notes-drawn"))


async def test_rt71_the_keyword_page_explains_its_movement(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    first_day = runtime.clock.now().date().isoformat()
    schedule = await explained_schedule(runtime, tenant, sim)
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(
        f"{live_url}/ui/ranktracking/schedules/{schedule.id}/keyword?keyword={quote('red shoes')}"
    )

    movement = page.locator("#rt-movements article.rt-movement").first
    assert await movement.get_attribute("data-device") == "desktop"
    assert (await movement.locator("h3 .rt-change").inner_text()).strip() == "3 → 5"
    reasons = await movement.locator(".rt-reasons li").all_inner_texts()
    assert reasons[0] == "Down 2 places: 3 → 5."
    assert f"{RIVAL} overtook you (8 → 2)." in reasons
    assert "The featured snippet vanished." in reasons
    assert f"An AI Overview appeared (links to {RIVAL}, wiki-shoes.org)." in reasons
    assert any(r.startswith("Your ranking page changed:") for r in reasons)

    # The pages side by side, folded until asked for.
    diff = movement.locator("details.rt-diff")
    assert not await diff.locator("table").is_visible()
    await diff.locator("summary").click()
    second = diff.locator("tbody tr").nth(1)
    assert (await second.locator("td").nth(2).inner_text()).strip() == RIVAL
    assert "(you)" in await diff.locator("tbody tr").nth(4).locator("td").nth(2).inner_text()

    # Features over time: the AI Overview absent, then shown (not citing the site).
    ai_row = page.locator("#rt-features tr[data-feature=ai_overview] td")
    assert [c.strip() for c in await ai_row.all_inner_texts()] == ["–", "shown"]
    snippet = page.locator("#rt-features tr[data-feature=featured_snippet] td")
    assert [c.strip() for c in await snippet.all_inner_texts()] == ["shown", "–"]

    # The automatic notes, listed and drawn on the chart.
    autos = await page.locator("#rt-chart-notes li[data-kind=auto]").all_inner_texts()
    assert any("AI Overview appeared" in a for a in autos)
    assert any("Ranking URL changed" in a for a in autos)
    drawn_before = await _drawn(page)
    assert drawn_before == len(autos)

    # A note written from the page: drawn and listed; changed; deleted.
    form = page.locator("#rt-note-form")
    await form.locator("input[name=at]").fill(first_day)
    await form.locator("input[name=text]").fill("New title tags")
    await form.locator("button[type=submit]").click()
    await page.wait_for_url("**notice=**")
    assert (await page.locator("#rt-notice").inner_text()).strip() == "Note added"
    users = await page.locator("#rt-chart-notes li[data-kind=user]").all_inner_texts()
    assert users == [f"{first_day} New title tags"]
    assert await _drawn(page) == drawn_before + 1

    note = page.locator("#rt-notes li.rt-note").first
    await note.locator("input[name=text]").fill("New title tags and meta descriptions")
    await note.locator("button", has_text="Save").click()
    await page.wait_for_url("**notice=Note%20saved**")
    users = await page.locator("#rt-chart-notes li[data-kind=user]").all_inner_texts()
    assert users == [f"{first_day} New title tags and meta descriptions"]

    await page.locator("#rt-notes li.rt-note").first.locator("button", has_text="Delete").click()
    await page.wait_for_url("**notice=Note%20deleted**")
    assert await page.locator("#rt-chart-notes li[data-kind=user]").count() == 0
    assert await _drawn(page) == drawn_before

    # An empty note is refused with a plain message, nothing written.
    await page.locator("#rt-note-form input[name=at]").fill(first_day)
    await page.locator("#rt-note-form input[name=text]").fill("   ")
    await page.locator("#rt-note-form button[type=submit]").click()
    await page.wait_for_url("**notice=**")
    assert "cannot be empty" in await page.locator("#rt-notice").inner_text()

    # The schedule page lists the competitors found on the pages.
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    first = page.locator("#rt-discovered tbody tr").first
    assert await first.get_attribute("data-domain") == RIVAL
    assert errors == []


async def test_rt76_a_one_day_balance_chart_spans_days_not_years(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    await fund(runtime, tenant, 5_000)  # the only ledger entry: one day of history
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking/balance")
    await page.wait_for_function("document.getElementById('rt-balance-chart').uplot !== undefined")
    state = await page.evaluate(
        """() => {
          const u = document.getElementById('rt-balance-chart').uplot;
          return {x: u.data[0], min: u.scales.x.min, max: u.scales.x.max,
                  values: u.data[1], ticks: u.axes[0]._values || null};
        }"""
    )
    assert len(state["x"]) == 1
    assert state["values"] == [50.0]
    assert state["max"] - state["min"] <= 3 * DAY
    assert state["min"] <= state["x"][0] <= state["max"]
    assert errors == []
