"""The schedule page's positions table and charts in a real browser, from three weekly runs on
desktop and mobile seeded through the SERP simulator: sorting and filtering the table, the charts'
points, dated axis and aligned devices, and no console errors."""

from __future__ import annotations

from typing import Any

import pytest

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.e2e.conftest import sign_in
from tests.e2e.page_errors import watch_errors
from tests.engines.ranktracking.factories import (  # noqa: F401 - the simulator fixtures
    seeded_schedule,
    served_sim,
    sim,
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def rows(page: Any) -> list[tuple[str, str]]:
    out = []
    for row in await page.locator("#rt-positions-table tbody tr.rt-row").all():
        out.append(
            (await row.get_attribute("data-keyword"), await row.get_attribute("data-device"))
        )
    return out


async def test_positions_table_sorts_and_filters(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    # Seeded first: the weeks it moves the clock by would outlast a session signed in before.
    schedule = await seeded_schedule(runtime, tenant, sim)
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    assert len(await rows(page)) == 6
    dates = await page.locator("#rt-positions-table thead th.rt-col time").all_inner_texts()
    assert len(dates) == 3
    assert dates == sorted(dates)
    red_mobile = page.locator("tr.rt-row[data-keyword='red shoes'][data-device=mobile]")
    assert [c.strip() for c in await red_mobile.locator("td.rt-cell").all_inner_texts()] == [
        "6",
        "6",
        "1",
    ]
    assert (await red_mobile.locator("td.rt-change").inner_text()).strip() == "▲ 5"
    green_desktop = page.locator("tr.rt-row[data-keyword='green shoes'][data-device=desktop]")
    assert (await green_desktop.locator("td.rt-change").inner_text()).strip() == "lost"
    assert (await green_desktop.locator("td.rt-best").inner_text()).strip() == "3"
    visibility = page.locator("tr.rt-summary[data-device=mobile][data-figure=visibility] td")
    assert (await visibility.nth(2).inner_text()).strip() == "52.42 %"

    # Sort by position (a header link), then descending.
    await page.click("#rt-positions-table th a[data-sort=position]")
    await page.wait_for_url("**sort=position**")
    assert (await rows(page))[:4] == [
        ("red shoes", "mobile"),
        ("green shoes", "mobile"),
        ("red shoes", "desktop"),
        ("blue shoes", "desktop"),
    ]
    assert (
        await page.locator("#rt-positions-table th[aria-sort=ascending] a").get_attribute(
            "data-sort"
        )
        == "position"
    )
    await page.click("#rt-positions-table th a[data-sort=position]")
    await page.wait_for_url("**order=desc**")
    assert (await rows(page))[0] == ("blue shoes", "desktop")

    # Filter: mobile rows in the top 3; then moved by at least 3 places on both devices.
    await page.select_option("#rt-filters select[name=device]", "mobile")
    await page.select_option("#rt-filters select[name=band]", "in_top:3")
    await page.click("#rt-filter-apply")
    await page.wait_for_url("**band=in_top**")
    # The sort chosen before is kept: still by position, descending.
    assert await rows(page) == [("green shoes", "mobile"), ("red shoes", "mobile")]
    await page.select_option("#rt-filters select[name=device]", "")
    await page.select_option("#rt-filters select[name=band]", "")
    await page.fill("#rt-filters input[name=moved]", "3")
    await page.click("#rt-filter-apply")
    await page.wait_for_url("**moved=3**")
    assert set(await rows(page)) == {
        ("red shoes", "mobile"),
        ("green shoes", "desktop"),
        ("green shoes", "mobile"),
    }
    # The export link carries the filters: the CSV holds the rows shown.
    href = await page.locator("#rt-export-positions").get_attribute("href")
    response = await page.request.get(f"{live_url}{href}")
    assert response.ok
    assert response.headers["content-type"].startswith("text/csv")
    lines = (await response.text()).splitlines()
    assert lines[0].startswith("keyword,device,")
    assert {tuple(line.split(",")[:2]) for line in lines[1:]} == {
        ("red shoes", "mobile"),
        ("green shoes", "desktop"),
        ("green shoes", "mobile"),
    }
    href = await page.locator("#rt-export-log").get_attribute("href")
    log = await page.request.get(f"{live_url}{href}")
    assert len((await log.text()).splitlines()) == 1 + 6
    # A hand-edited address says what is wrong and shows the whole table.
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}?band=in_top:7")
    assert "Position" in await page.locator("#rt-table-errors").inner_text()
    assert len(await rows(page)) == 6
    assert errors == []


CHART_STATE = """(id) => {
  const u = document.getElementById(id).uplot;
  const drawn = [];
  for (let i = 1; i < u.data.length; i++) {
    const row = [];
    for (let k = 0; k < u.data[0].length; k++) {
      const v = u.data[i][k];
      if (v == null) { row.push(null); continue; }
      const cx = Math.round(u.valToPos(u.data[0][k], 'x', true));
      const cy = Math.round(u.valToPos(v, 'y', true));
      const px = u.ctx.getImageData(cx, cy, 1, 1).data;
      row.push([cx, px[3] > 0]);
    }
    drawn.push(row);
  }
  return {
    x: u.data[0],
    values: u.data.slice(1),
    labels: u.series.slice(1).map((s) => s.label),
    ticks: u.axes[0]._values,
    legend: Array.from(u.root.querySelectorAll('.u-legend .u-series th')).map((e) => e.textContent),
    drawn: drawn,
  };
}"""


async def chart(page: Any, element_id: str) -> dict[str, Any]:
    await page.wait_for_function(f"document.getElementById('{element_id}').uplot !== undefined")
    return await page.evaluate(CHART_STATE, element_id)


async def test_charts_one_point_per_measurement_dated_and_aligned(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    errors = watch_errors(page)
    schedule = await seeded_schedule(runtime, tenant, sim)
    # A second schedule measured once: its single measurement must still be drawn.
    from tests.engines.ranktracking.factories import make_schedule, measure

    single = await make_schedule(
        runtime, tenant, name="Once", keywords=["red shoes"], devices=["desktop", "mobile"]
    )
    await measure(runtime, sim, single.id, {"red shoes": (4, 9)})
    # A fourth run of the first schedule in which "red shoes" has no data: a gap, not a point.
    sim.script("red shoes", no_data=True)
    from tests.engines.ranktracking.factories import PLAN

    await measure(runtime, sim, schedule.id, {k: v for k, v in PLAN[2].items() if k != "red shoes"})
    await sign_in(page, live_url, tenant.email, tenant.password)

    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}/keyword?keyword=red+shoes")
    state = await chart(page, "rt-history")
    assert state["labels"] == ["desktop", "mobile"]
    assert len(state["x"]) == 4  # one x per measured request, both devices on it
    assert state["values"] == [[5, 2, 4, None], [6, 6, 1, None]]
    desktop, mobile = state["drawn"]
    # Every measurement is a drawn point; desktop and mobile of a run at the same x.
    assert all(p[1] for p in desktop[:3] + mobile[:3])
    assert [p[0] for p in desktop[:3]] == [p[0] for p in mobile[:3]]
    assert desktop[3] is None
    assert mobile[3] is None
    assert state["ticks"]
    assert all(len(t) == 10 and t[4] == "-" and t[7] == "-" for t in state["ticks"])
    assert {"desktop", "mobile"} <= set(state["legend"])

    # The schedule's visibility and average position over time, same x per device.
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    visibility = await chart(page, "rt-chart-1")
    assert visibility["labels"] == ["desktop", "mobile"]
    assert visibility["values"][0][0] == 20.89
    assert visibility["values"][0][2] == 14.86
    assert visibility["values"][1][0] == 23.19
    assert visibility["values"][1][2] == 52.42
    assert all(p and p[1] for row in visibility["drawn"] for p in row)
    average = await chart(page, "rt-chart-2")
    assert average["values"][0][0] == 4.0
    assert average["values"][1][2] == 1.5
    assert [p[0] for p in average["drawn"][0]] == [p[0] for p in average["drawn"][1]]

    # One measurement: one point per device, drawn, on one dated axis.
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{single.id}/keyword?keyword=red+shoes")
    once = await chart(page, "rt-history")
    assert once["values"] == [[4], [9]]
    assert once["drawn"][0][0][1]
    assert once["drawn"][1][0][1]
    assert once["drawn"][0][0][0] == once["drawn"][1][0][0]
    assert once["ticks"]
    assert all(t[4] == "-" for t in once["ticks"])
    assert errors == []


async def test_competitors_and_owned_features_on_the_page(
    page: Any,
    live_url: str,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,  # noqa: F811
) -> None:
    from tests.engines.ranktracking.factories import KEYWORDS, fund, make_schedule, measure

    errors = watch_errors(page)
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    await page.fill("#rt-competitors input[name=domains]", "rival.com, https://www.other-shop.net/")
    await page.click("#rt-competitors button[type=submit]")
    await page.wait_for_selector("#rt-notice")
    assert "rival.com, other-shop.net" in await page.locator("#rt-notice").inner_text()

    sim.place("red shoes", "rival.com", 2)
    sim.script("red shoes", features=["featured_snippet"])
    for plain in ("blue shoes", "green shoes"):
        sim.script(plain, features=[])  # organic results only
    await measure(runtime, sim, schedule.id, {"red shoes": (1, 5), "blue shoes": (3, 3)})
    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    heads = await page.locator("#rt-positions-table thead th.rt-competitor").all_inner_texts()
    assert heads == ["rival.com", "other-shop.net"]
    red_desktop = page.locator("tr.rt-row[data-keyword='red shoes'][data-device=desktop]")
    rival = red_desktop.locator("td.rt-competitor[data-domain='rival.com']")
    assert (await rival.inner_text()).strip() == "2"
    assert "featured_snippet" in await red_desktop.locator(".rt-owned").inner_text()

    await page.select_option("#rt-filters select[name=features]", "owned")
    await page.click("#rt-filter-apply")
    await page.wait_for_url("**features=owned**")
    assert await rows(page) == [("red shoes", "desktop")]
    await page.select_option("#rt-filters select[name=features]", "winnable")
    await page.click("#rt-filter-apply")
    await page.wait_for_url("**features=winnable**")
    assert await rows(page) == [("red shoes", "mobile")]  # fifth: the snippet is someone else's

    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}/keyword?keyword=red+shoes")
    state = await chart(page, "rt-history")
    assert state["labels"] == ["desktop", "mobile", "rival.com (desktop)", "rival.com (mobile)"]
    assert state["values"] == [[1], [5], [2], [2]]
    assert all(row[0][1] for row in state["drawn"])
    assert errors == []
