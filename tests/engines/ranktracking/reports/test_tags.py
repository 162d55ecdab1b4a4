"""Tags on a schedule's keywords over the API (RT-70) and the positions table, its figures and
the per-run chart filtered by a tag (RT-71), from runs seeded through the SERP simulator."""

from __future__ import annotations

from typing import Any

import httpx

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import make_schedule, seeded_schedule
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


async def _tag(
    client: httpx.AsyncClient, tenant: Tenant, schedule_id: int, tag: str, keywords: list[str]
) -> httpx.Response:
    return await client.post(
        f"{BASE}/schedules/{schedule_id}/tags",
        json={"tag": tag, "keywords": keywords},
        headers=auth(tenant),
    )


async def test_rt70_tags_are_added_listed_and_removed(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule = await make_schedule(runtime, tenant)
    r = await _tag(client, tenant, schedule.id, "  Brand ", ["Red Shoes", "blue shoes"])
    assert r.status_code == 200, r.text
    assert r.json() == {
        "tag": "brand",
        "changed": ["red shoes", "blue shoes"],
        "unchanged": [],
        "keyword_count": 2,
    }
    again = await _tag(client, tenant, schedule.id, "BRAND", ["red shoes"])
    assert (again.json()["changed"], again.json()["unchanged"]) == ([], ["red shoes"])
    await _tag(client, tenant, schedule.id, "sale", ["red shoes"])
    listed = await client.get(f"{BASE}/schedules/{schedule.id}/tags", headers=auth(tenant))
    assert listed.json() == {
        "tags": [{"tag": "brand", "keyword_count": 2}, {"tag": "sale", "keyword_count": 1}],
        "keywords": {"blue shoes": ["brand"], "red shoes": ["brand", "sale"]},
    }
    removed = await client.post(
        f"{BASE}/schedules/{schedule.id}/tags/remove",
        json={"tag": "brand", "keywords": ["red shoes", "green shoes"]},
        headers=auth(tenant),
    )
    assert removed.status_code == 200, removed.text
    assert removed.json() == {
        "tag": "brand",
        "changed": ["red shoes"],
        "unchanged": ["green shoes"],
        "keyword_count": 1,
    }


async def test_rt70_a_keyword_the_schedule_does_not_measure_is_refused_naming_it(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant)
    r = await _tag(client, tenant, schedule.id, "brand", ["red shoes", "purple shoes"])
    assert r.status_code == 422, r.text
    detail = r.json()["details"][0]
    assert (detail["field"], detail["code"]) == ("keywords", "unknown_keyword")
    assert '"purple shoes"' in detail["message"]
    listed = await client.get(f"{BASE}/schedules/{schedule.id}/tags", headers=auth(tenant))
    assert listed.json()["tags"] == []  # nothing half-written
    for tag in ("   ", "x" * 51):
        bad = await _tag(client, tenant, schedule.id, tag, ["red shoes"])
        assert bad.status_code == 422, bad.text
        assert bad.json()["details"][0]["field"] == "tag"
    foreign = await _tag(client, other_tenant, schedule.id, "brand", ["red shoes"])
    assert foreign.status_code == 404


def _keys(page: dict[str, Any]) -> set[tuple[str, str]]:
    return {(r["keyword"], r["device"]) for r in page["items"]}


async def test_rt71_positions_and_per_run_figures_filtered_by_tag(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    await _tag(client, tenant, schedule.id, "colours", ["red shoes", "green shoes"])
    url = f"{BASE}/schedules/{schedule.id}"

    page = (await client.get(f"{url}/positions?tag=Colours", headers=auth(tenant))).json()
    assert _keys(page) == {
        ("red shoes", "desktop"),
        ("red shoes", "mobile"),
        ("green shoes", "desktop"),
        ("green shoes", "mobile"),
    }
    assert page["total"] == 4
    # Combined with the other filters and paged by the database.
    top3 = (
        await client.get(f"{url}/positions?tag=colours&in_top=3&limit=1", headers=auth(tenant))
    ).json()
    assert (top3["total"], top3["next_cursor"]) == (2, "1")  # red shoes mobile 1, green mobile 2

    # Latest measurement, desktop: red 4th, green not within the top 10; mobile: red 1st, green
    # 2nd (PLAN). The figures follow the tag: blue shoes counts in neither.
    latest = {
        s["device"]: s
        for s in page["summaries"]
        if s["request_id"] == max(x["request_id"] for x in page["summaries"])
    }
    assert (latest["desktop"]["measured"], latest["desktop"]["ranked"]) == (2, 1)
    assert latest["desktop"]["average_position"] == 4.0
    assert latest["mobile"]["average_position"] == 1.5
    # visibility = 100 × (ctr(1) + ctr(2)) / (2 × ctr(1))
    assert latest["mobile"]["visibility"] == round(100 * (27.6 + 15.8) / (2 * 27.6), 2)

    chart = (await client.get(f"{url}/summary?tag=colours", headers=auth(tenant))).json()
    newest = [s for s in chart["items"] if s["request_id"] == chart["items"][0]["request_id"]]
    assert {s["device"]: s["average_position"] for s in newest} == {"desktop": 4.0, "mobile": 1.5}
    whole = (await client.get(f"{url}/summary", headers=auth(tenant))).json()
    assert whole["items"][0]["measured"] == 3  # without the tag: every keyword

    none = (await client.get(f"{url}/positions?tag=nothing", headers=auth(tenant))).json()
    assert (none["total"], none["items"]) == (0, [])
    bad = await client.get(f"{url}/positions?tag=" + "x" * 60, headers=auth(tenant))
    assert bad.status_code == 422
    assert bad.json()["details"][0]["field"] == "tag"

    csv = await client.get(f"{url}/positions.csv?tag=colours", headers=auth(tenant))
    assert csv.status_code == 200
    assert "blue shoes" not in csv.text
    assert "green shoes" in csv.text
