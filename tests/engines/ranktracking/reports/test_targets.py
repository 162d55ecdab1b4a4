"""Target URL per keyword, from runs seeded through the SERP simulator: the report flags another
page of the domain ranking instead of the target (cannibalisation) and ranking pages that
alternate; the targets' rules."""

from __future__ import annotations

import httpx

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import DOMAIN, collect, fund, launch, make_schedule
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


async def test_other_page_ranking_and_alternating_pages_are_flagged(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    h = auth(tenant)
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, keywords=["red shoes", "blue shoes"])
    r = await client.put(
        f"{BASE}/schedules/{schedule.id}/targets",
        json={"targets": {"Red  Shoes": "https://www.acme-shop.com/red-shoes/"}},
        headers=h,
    )
    assert r.status_code == 200, r.text
    assert r.json()["targets"] == {"red shoes": "https://www.acme-shop.com/red-shoes/"}

    async def run(red_path: str, blue_path: str) -> dict[str, dict[str, object]]:
        sim.place("red shoes", DOMAIN, 3, path=red_path)
        sim.place("blue shoes", DOMAIN, 5, path=blue_path)
        for run_id in await launch(runtime, schedule.id):
            await collect(runtime, run_id)
        runtime.clock.advance(days=7)  # type: ignore[attr-defined]
        r = await client.get(f"{BASE}/schedules/{schedule.id}/positions", headers=h)
        return {row["keyword"]: row for row in r.json()["items"]}

    rows = await run("/red-shoes", "/a")
    assert rows["red shoes"]["url_flags"] == []  # the target ranks (scheme, www. and / aside)
    assert rows["red shoes"]["target_url"] == "https://www.acme-shop.com/red-shoes/"
    rows = await run("/shoes-sale", "/b")
    assert rows["red shoes"]["url"] == f"https://{DOMAIN}/shoes-sale"
    assert rows["red shoes"]["url_flags"] == ["other_url"]  # cannibalisation
    assert rows["blue shoes"]["url_flags"] == []  # one change is not alternating
    rows = await run("/red-shoes", "/a")
    assert rows["red shoes"]["url_flags"] == ["alternating"]
    assert rows["blue shoes"]["url_flags"] == ["alternating"]  # without a target too
    assert rows["blue shoes"]["target_url"] is None

    r = await client.get(
        f"{BASE}/schedules/{schedule.id}/positions", params={"columns": 2}, headers=h
    )
    assert all(row["url_flags"] == [] for row in r.json()["items"])  # one change within 2 runs
    r = await client.get(
        f"{BASE}/schedules/{schedule.id}/positions",
        params={"url_issues": "true", "columns": 2},
        headers=h,
    )
    assert r.json()["items"] == []


async def test_target_rules(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant)
    url, h = f"{BASE}/schedules/{schedule.id}/targets", auth(tenant)
    for targets in (
        {"red shoes": "https://elsewhere.com/red"},
        {"red shoes": "ftp://acme-shop.com/red"},
        {"red shoes": "acme-shop.com/red"},
    ):
        r = await client.put(url, json={"targets": targets}, headers=h)
        assert r.status_code == 422, (targets, r.text)
        assert r.json()["details"][0]["field"] == "targets"
    r = await client.put(
        url, json={"targets": {"red shoes": "https://shop.acme-shop.com/red"}}, headers=h
    )
    assert r.status_code == 200  # a subdomain of the tracked domain
    r = await client.put(url, json={"targets": {"red shoes": ""}}, headers=h)
    assert r.json()["targets"] == {}
    r = await client.put(url, json={"targets": {}}, headers=auth(other_tenant))
    assert r.status_code == 404
