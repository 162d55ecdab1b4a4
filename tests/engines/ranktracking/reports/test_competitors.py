"""Competitors and SERP features, from runs seeded through the SERP simulator: the competitors'
positions come from the same result pages (no extra provider task), and a feature that links to
the tracked domain (its featured snippet) is detected as owned; the "owned" and "winnable" filters."""

from __future__ import annotations

from typing import Any

import httpx

from app.engines.ranktracking.reports.charts import schedule_charts
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import KEYWORDS, PLAN, fund, make_schedule, measure
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"
RIVAL = "rival.com"
# "red shoes": the rival's (desktop, mobile) position in each run of PLAN.
RIVAL_PLAN = [(1, 2), (3, 1), (2, 3)]


async def test_competitors_from_the_same_pages_and_owned_features(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    h = auth(tenant)
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    r = await client.put(
        f"{BASE}/schedules/{schedule.id}/competitors",
        json={"domains": ["https://www.Rival.com/shoes", "other-shop.net", "rival.com"]},
        headers=h,
    )
    assert r.status_code == 200, r.text
    assert r.json()["domains"] == [RIVAL, "other-shop.net"]
    for i, (plan, (desktop, mobile)) in enumerate(zip(PLAN, RIVAL_PLAN, strict=True)):
        sim.place("red shoes", RIVAL, desktop, device="desktop")
        sim.place("red shoes", RIVAL, mobile, device="mobile")
        if i == 2:
            # The last page has a featured snippet (from the first organic result) and
            # "people also ask": on mobile the tracked domain is first and owns the snippet.
            sim.script("red shoes", features=["featured_snippet", "people_also_ask"])
        posted = sim.tasks_posted
        await measure(runtime, sim, schedule.id, plan)
        # One task per keyword and device: the competitors cost no extra task.
        assert sim.tasks_posted - posted == len(KEYWORDS) * 2
        runtime.clock.advance(days=7)  # type: ignore[attr-defined]

    r = await client.get(f"{BASE}/schedules/{schedule.id}/positions", headers=h)
    page = r.json()
    assert page["competitors"] == [RIVAL, "other-shop.net"]
    rows = {(row["keyword"], row["device"]): row for row in page["items"]}
    red_desktop, red_mobile = rows[("red shoes", "desktop")], rows[("red shoes", "mobile")]
    by_domain = {c["domain"]: c for c in red_desktop["competitors"]}
    assert (by_domain[RIVAL]["position"], by_domain[RIVAL]["previous"]) == (2, 3)
    assert by_domain[RIVAL]["change"] == "up"
    assert by_domain["other-shop.net"]["position"] is None  # read, not within the depth
    assert by_domain["other-shop.net"]["change"] == "unranked"
    rival_mobile = red_mobile["competitors"][0]
    assert (rival_mobile["position"], rival_mobile["change"]) == (3, "down")
    assert red_desktop["position"] == 4
    assert red_mobile["position"] == 1

    assert red_mobile["features"] == ["featured_snippet", "organic", "people_also_ask"]
    assert red_mobile["owned_features"] == ["featured_snippet"]
    assert red_desktop["owned_features"] == []
    assert red_desktop["winnable_features"] == ["featured_snippet", "people_also_ask"]
    assert red_mobile["winnable_features"] == ["people_also_ask"]

    r = await client.get(f"{BASE}/schedules/{schedule.id}/positions.csv", headers=h)
    lines = [line.split(",") for line in r.text.splitlines()]
    assert lines[0][-4:] == [RIVAL, "other-shop.net", "features", "owned_features"]
    red = next(line for line in lines if line[:2] == ["red shoes", "mobile"])
    assert red[-4:] == ["3", "", "featured_snippet organic people_also_ask", "featured_snippet"]

    async def keys(**params: Any) -> set[tuple[str, str]]:
        r = await client.get(f"{BASE}/schedules/{schedule.id}/positions", params=params, headers=h)
        assert r.status_code == 200, r.text
        return {(row["keyword"], row["device"]) for row in r.json()["items"]}

    assert await keys(features="owned") == {("red shoes", "mobile")}
    assert ("red shoes", "desktop") in await keys(features="winnable")
    r = await client.get(
        f"{BASE}/schedules/{schedule.id}/positions", params={"features": "all"}, headers=h
    )
    assert (r.status_code, r.json()["details"][0]["field"]) == (422, "features")


async def test_competitor_rules(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant)
    url, h = f"{BASE}/schedules/{schedule.id}/competitors", auth(tenant)
    for domains in (
        [f"rival{i}.com" for i in range(6)],
        ["acme-shop.com"],  # the tracked domain
        ["not a domain"],
        ["localhost"],
    ):
        r = await client.put(url, json={"domains": domains}, headers=h)
        assert r.status_code == 422, (domains, r.text)
        assert r.json()["details"][0]["field"] == "domains"
    r = await client.put(url, json={"domains": []}, headers=h)
    assert r.json()["domains"] == []
    r = await client.put(url, json={"domains": ["rival.com"]}, headers=auth(other_tenant))
    assert r.status_code == 404
    r = await client.put(url, json={"domain": ["rival.com"]}, headers=h)
    assert r.status_code == 422  # an unknown field is refused, not ignored


async def test_competitors_in_the_schedule_charts_and_who_gained(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """Issue 15 item 3: per domain, visibility and average position over time from the same
    pages, and who gained, who lost between the last two measurements."""
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    r = await client.put(
        f"{BASE}/schedules/{schedule.id}/competitors",
        json={"domains": ["rival.com"]},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    sim.place("red shoes", "rival.com", 1)
    sim.place("blue shoes", "rival.com", 4)
    await measure(runtime, sim, schedule.id, PLAN[0])
    sim.place("red shoes", "rival.com", 3)
    await measure(runtime, sim, schedule.id, PLAN[1])
    async with runtime.db.read() as session:
        visibility, average = await schedule_charts(session, schedule.id)
    by_label = {s.label: s.values for s in visibility.series}
    # rival.com ranks 1, 4 and beyond the depth: 100 × (27.6 + 8.4) / (3 × 27.6).
    assert by_label["rival.com (desktop)"] == [43.48, 23.43]
    assert by_label["desktop"] == [20.89, 35.63]
    assert {s.label: s.values for s in average.series}["rival.com (mobile)"] == [2.5, 3.5]

    r = await client.get(
        f"{BASE}/schedules/{schedule.id}/competitors/summary", headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert (items[0]["domain"], items[0]["tracked"], items[0]["trend"]) == (
        "acme-shop.com",
        True,
        "gained",
    )
    rival = next(i for i in items if i["domain"] == "rival.com" and i["device"] == "desktop")
    assert (rival["trend"], rival["visibility_change"], rival["average_change"]) == (
        "lost",
        -20.05,
        -1.0,
    )
