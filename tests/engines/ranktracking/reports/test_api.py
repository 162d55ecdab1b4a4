"""The positions table and per-run figures over the API, from runs seeded through the SERP
simulator over three dates on desktop and mobile: changes, best positions, average position,
visibility, filters, sorting, pagination, bad input and workspace isolation."""

from __future__ import annotations

from typing import Any

import httpx

from app.engines.ranktracking import ledger
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import (
    KEYWORDS,
    PLAN,
    fund,
    make_schedule,
    measure,
    seeded_schedule,
)
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


def by_row(items: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["keyword"], r["device"]): r for r in items}


async def test_positions_table_changes_best_and_history_per_device(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    r = await client.get(f"{BASE}/schedules/{schedule.id}/positions", headers=auth(tenant))
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["total"] == 6
    assert page["next_cursor"] is None
    columns = page["columns"]
    assert len(columns) == 3
    assert all(set(c["runs"]) == {"desktop", "mobile"} for c in columns)
    assert [c["measured_at"] for c in columns] == sorted(c["measured_at"] for c in columns)
    rows = by_row(page["items"])
    expect = {
        ("red shoes", "desktop"): (4, 2, "down", -2, 2, [5, 2, 4]),
        ("red shoes", "mobile"): (1, 6, "up", 5, 1, [6, 6, 1]),
        ("blue shoes", "desktop"): (7, 9, "up", 2, 7, [None, 9, 7]),
        ("blue shoes", "mobile"): (None, None, "unranked", None, 8, [8, None, None]),
        ("green shoes", "desktop"): (None, 3, "lost", None, 3, [3, 3, None]),
        ("green shoes", "mobile"): (2, None, "new", None, 2, [3, None, 2]),
    }
    got = {
        key: (
            row["position"],
            row["previous"],
            row["change"],
            row["delta"],
            row["best"],
            [c["position"] for c in row["cells"]],
        )
        for key, row in rows.items()
    }
    assert got == expect
    assert all(c["state"] == "retrieved" for row in rows.values() for c in row["cells"])
    assert "acme-shop.com" in rows[("red shoes", "desktop")]["url"]
    assert rows[("green shoes", "desktop")]["url"] is None
    assert rows[("red shoes", "desktop")]["search_volume"] is None  # no keyword data measured

    # The columns' per-run figures: average over ranked keywords, CTR-weighted visibility.
    figures = {(s["request_id"], s["device"]): s for s in page["summaries"]}
    last, first = columns[-1]["request_id"], columns[0]["request_id"]
    desktop = figures[(last, "desktop")]
    assert (desktop["measured"], desktop["ranked"], desktop["top3"], desktop["top10"]) == (
        3,
        2,
        0,
        2,
    )
    assert desktop["average_position"] == 5.5
    assert desktop["visibility"] == 14.86  # 100 × (8.4 + 3.9) / (3 × 27.6)
    mobile = figures[(last, "mobile")]
    assert (mobile["average_position"], mobile["visibility"], mobile["top3"]) == (1.5, 52.42, 2)
    assert figures[(first, "desktop")]["average_position"] == 4.0
    assert figures[(first, "desktop")]["visibility"] == 20.89
    assert figures[(first, "mobile")]["average_position"] == 5.67
    assert figures[(first, "mobile")]["visibility"] == 23.19


async def test_positions_filters_sorting_and_pages(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    url, h = f"{BASE}/schedules/{schedule.id}/positions", auth(tenant)

    async def keys(**params: Any) -> list[tuple[str, str]]:
        r = await client.get(url, params=params, headers=h)
        assert r.status_code == 200, r.text
        return [(row["keyword"], row["device"]) for row in r.json()["items"]]

    assert await keys(device="mobile") == [
        ("blue shoes", "mobile"),
        ("green shoes", "mobile"),
        ("red shoes", "mobile"),
    ]
    assert set(await keys(moved=3)) == {
        ("red shoes", "mobile"),
        ("green shoes", "desktop"),
        ("green shoes", "mobile"),
    }
    assert len(await keys(moved=2)) == 5
    assert set(await keys(in_top=3)) == {("red shoes", "mobile"), ("green shoes", "mobile")}
    assert set(await keys(out_of_top=3)) == {
        ("red shoes", "desktop"),
        ("blue shoes", "desktop"),
        ("blue shoes", "mobile"),
        ("green shoes", "desktop"),
    }
    assert await keys(q="GREEN") == [("green shoes", "desktop"), ("green shoes", "mobile")]
    # Rows without a position come last whichever the order.
    assert await keys(sort="position") == [
        ("red shoes", "mobile"),
        ("green shoes", "mobile"),
        ("red shoes", "desktop"),
        ("blue shoes", "desktop"),
        ("blue shoes", "mobile"),
        ("green shoes", "desktop"),
    ]
    assert (await keys(sort="position", order="desc"))[:4] == [
        ("blue shoes", "desktop"),
        ("red shoes", "desktop"),
        ("green shoes", "mobile"),
        ("red shoes", "mobile"),
    ]
    assert await keys(sort="change") == [
        ("red shoes", "mobile"),
        ("blue shoes", "desktop"),
        ("green shoes", "mobile"),
        ("blue shoes", "mobile"),
        ("red shoes", "desktop"),
        ("green shoes", "desktop"),
    ]
    assert (await keys(sort="best"))[0] == ("red shoes", "mobile")

    # Pages of two, following next_cursor; the window of runs shrinks to the last two.
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 2, "columns": 2}
    while True:
        r = await client.get(url, params=params, headers=h)
        body = r.json()
        assert body["total"] == 6
        assert len(body["columns"]) == 2
        seen += body["items"]
        if body["next_cursor"] is None:
            break
        params["cursor"] = body["next_cursor"]
    assert len(seen) == 6
    assert len({(s["keyword"], s["device"]) for s in seen}) == 6
    # The change still compares with the run before the window.
    assert by_row(seen)[("red shoes", "mobile")]["change"] == "up"
    assert [c["position"] for c in by_row(seen)[("red shoes", "mobile")]["cells"]] == [6, 1]


async def test_summary_pages_newest_first(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    url, h = f"{BASE}/schedules/{schedule.id}/summary", auth(tenant)
    r = await client.get(url, params={"limit": 2}, headers=h)
    assert r.status_code == 200, r.text
    first = r.json()
    assert len(first["items"]) == 4  # two requests × two devices
    assert first["items"][0]["request_id"] > first["items"][-1]["request_id"]
    assert first["items"][0]["visibility"] == 14.86
    r = await client.get(url, params={"cursor": first["next_cursor"]}, headers=h)
    rest = r.json()
    assert rest["next_cursor"] is None
    assert [(s["device"], s["average_position"]) for s in rest["items"]] == [
        ("desktop", 4.0),
        ("mobile", 5.67),
    ]


async def test_reports_bad_input_is_422_and_other_workspace_404(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    sim: SerpSimulator,
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    url, h = f"{BASE}/schedules/{schedule.id}/positions", auth(tenant)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"device": "tablet"}, "device"),
        ({"moved": 0}, "moved"),
        ({"in_top": 5}, "in_top"),
        ({"out_of_top": 7}, "out_of_top"),
        ({"sort": "colour"}, "sort"),
        ({"order": "up"}, "order"),
        ({"columns": 53}, "columns"),
        ({"limit": 0}, "limit"),
        ({"cursor": "x1"}, "cursor"),
    ]
    for params, field in cases:
        r = await client.get(url, params=params, headers=h)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["details"][0]["field"] == field
    r = await client.get(url, params={"moved": "lots"}, headers=h)
    assert r.status_code == 422  # not a number: refused before the handler
    r = await client.get(f"{BASE}/schedules/{schedule.id}/summary?cursor=zz", headers=h)
    assert r.status_code == 422
    for path in ("positions", "summary"):
        r = await client.get(f"{BASE}/schedules/{schedule.id}/{path}", headers=auth(other_tenant))
        assert (r.status_code, r.json()["code"]) == (404, "schedule_not_found")


async def test_search_volume_from_keyword_data_of_the_same_list(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    from sqlalchemy import select

    from app.engines.ranktracking.models import Result
    from tests.engines.ranktracking.factories import (
        KEYWORDS,
        collect,
        launch,
        make_list,
        make_schedule,
    )

    kl = await make_list(runtime, tenant, KEYWORDS)
    other = await make_list(runtime, tenant, ["red shoes"], name="Other")
    schedule = await seeded_schedule(runtime, tenant, sim, list_id=kl.id, keywords=None)
    volume_schedules = []
    # The other list is measured later and elsewhere: its volume of "red shoes" differs.
    for list_id, location in ((kl.id, 2840), (other.id, 2826)):
        data = await make_schedule(
            runtime,
            tenant,
            list_id=list_id,
            location_code=location,
            data_type="keyword_data",
            frequency="monthly",
            packages=["volume"],
            devices=None,
            depth=None,
            domain=None,
        )
        volume_schedules.append(data.id)
        for run_id in await launch(runtime, data.id):
            await collect(runtime, run_id)
    async with runtime.db.read() as session:
        rows = await session.execute(
            select(Result.keyword, Result.data).where(Result.schedule_id == volume_schedules[0])
        )
        volumes = {kw: d["search_volume"] for kw, d in rows.all()}
        elsewhere = await session.scalar(
            select(Result.data).where(Result.schedule_id == volume_schedules[1])
        )
    assert elsewhere is not None
    assert elsewhere["search_volume"] != volumes["red shoes"]
    assert set(volumes) == set(KEYWORDS)
    assert all(isinstance(v, int) for v in volumes.values())
    r = await client.get(f"{BASE}/schedules/{schedule.id}/positions", headers=auth(tenant))
    got = {(row["keyword"], row["device"]): row["search_volume"] for row in r.json()["items"]}
    assert got == {(kw, d): volumes[kw] for kw in KEYWORDS for d in ("desktop", "mobile")}
    r = await client.get(
        f"{BASE}/schedules/{schedule.id}/positions",
        params={"sort": "volume", "order": "desc", "device": "desktop"},
        headers=auth(tenant),
    )
    assert [row["keyword"] for row in r.json()["items"]] == sorted(
        KEYWORDS, key=lambda kw: -volumes[kw]
    )


async def test_balance_over_time(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """Issue 16 item 5: the available balance at the end of each UTC day, from the ledger."""
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, keywords=KEYWORDS, devices=["desktop"])
    runtime.clock.advance(days=2)  # type: ignore[attr-defined]
    await measure(runtime, sim, schedule.id, PLAN[0])
    r = await client.get("/api/v1/ranktracking/balance/history", headers=auth(tenant))
    assert r.status_code == 200, r.text
    chart = r.json()
    assert [s["label"] for s in chart["series"]] == ["available (EUR)"]
    values = chart["series"][0]["values"]
    assert len(chart["x"]) == len(values) == 3
    assert chart["x"][1] - chart["x"][0] == 86_400
    async with runtime.db.read() as session:
        available = await ledger.ledger_available(session, tenant.organisation_id)
    assert values == [100.0, 100.0, available / 1_000_000]
    assert values[2] < 100.0
    r = await client.get("/api/v1/ranktracking/balance/history?days=0", headers=auth(tenant))
    assert r.status_code == 422
