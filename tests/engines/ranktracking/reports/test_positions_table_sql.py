"""The positions table (issue 15, item 1) filtered, ordered and paged by the database: the same rows in the
same order as the table's definition applied to every row in Python — ties by keyword then
device, rows without a value last whichever the direction, text by code point — for keywords
never measured, keywords lost, a keyword dropped from the schedule, the device filter, and pages
followed by their cursor."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import fund, make_schedule, measure
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"
KEYWORDS = ["alpha", "beta", "gamma", "delta shoes", "epsilon", "éclair", "zebra"]
# keyword -> (desktop, mobile) per measurement; depth top10, so None is "not within the depth".
PLAN: list[dict[str, tuple[int | None, int | None]]] = [
    {
        "alpha": (3, 3),
        "beta": (3, 5),
        "gamma": (None, 2),
        "delta shoes": (7, 7),
        "epsilon": (1, None),
        "éclair": (5, 5),
        "zebra": (5, 5),
    },
    {
        "alpha": (3, 4),
        "beta": (3, 6),
        "gamma": (4, None),
        "delta shoes": (9, 2),
        "epsilon": (None, None),
        "éclair": (6, 8),
        "zebra": (6, 8),
    },
]
# Measured after "epsilon" left the schedule.
LAST: dict[str, tuple[int | None, int | None]] = {
    "alpha": (2, 4),
    "beta": (2, 4),
    "gamma": (4, 1),
    "delta shoes": (None, 2),
    "éclair": (6, 3),
    "zebra": (6, 3),
}

CHANGE_ORDER = {"up": 0, "new": 1, "same": 2, "unranked": 3, "down": 4, "lost": 5}


def sort_value(row: dict[str, Any], key: str) -> Any:
    if key == "change":
        return (CHANGE_ORDER[row["change"]], -(row["delta"] or 0)) if row["change"] else None
    return row["search_volume" if key == "volume" else key]


def shown(row: dict[str, Any], params: dict[str, Any]) -> bool:
    """The table's filters, as its definition states them."""
    if params.get("device") and row["device"] != params["device"]:
        return False
    if "moved" in params and not (
        row["change"] in ("new", "lost")
        or (row["delta"] is not None and abs(row["delta"]) >= params["moved"])
    ):
        return False
    if "in_top" in params and (row["position"] is None or row["position"] > params["in_top"]):
        return False
    if "out_of_top" in params and (
        row["state"] != "retrieved"
        or (row["position"] is not None and row["position"] <= params["out_of_top"])
    ):
        return False
    if params.get("q") and params["q"] not in row["keyword"]:
        return False
    if params.get("features") == "owned" and not row["owned_features"]:
        return False
    if params.get("features") == "winnable" and not row["winnable_features"]:
        return False
    return not (params.get("url_issues") and not row["url_flags"])


def expected(rows: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    key, order = params.get("sort", "keyword"), params.get("order", "asc")
    rows = sorted((r for r in rows if shown(r, params)), key=lambda r: (r["keyword"], r["device"]))
    present = [r for r in rows if sort_value(r, key) is not None]
    absent = [r for r in rows if sort_value(r, key) is None]
    present.sort(key=lambda r: sort_value(r, key), reverse=order == "desc")
    return present + absent


async def measured_schedule(runtime: Runtime, tenant: Tenant, sim: SerpSimulator) -> int:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    for plan in PLAN:
        await measure(runtime, sim, schedule.id, plan)
        runtime.clock.advance(days=7)  # type: ignore[attr-defined]
    return schedule.id


async def set_keywords(client: httpx.AsyncClient, tenant: Tenant, sid: int, kws: list[str]) -> None:
    r = await client.put(
        f"{BASE}/schedules/{sid}/keywords", json={"keywords": kws}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text


async def every_page(
    client: httpx.AsyncClient, tenant: Tenant, sid: int, params: dict[str, Any], limit: int
) -> tuple[list[dict[str, Any]], set[int]]:
    """The rows of every page of ``limit`` rows, following next_cursor; the totals seen."""
    rows: list[dict[str, Any]] = []
    totals: set[int] = set()
    query = {**params, "limit": limit}
    while True:
        r = await client.get(
            f"{BASE}/schedules/{sid}/positions", params=query, headers=auth(tenant)
        )
        assert r.status_code == 200, (query, r.text)
        body = r.json()
        rows += body["items"]
        totals.add(body["total"])
        if body["next_cursor"] is None:
            return rows, totals
        query["cursor"] = body["next_cursor"]


def keys(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["keyword"], r["device"]) for r in rows]


async def test_database_order_and_filters_match_the_tables_definition(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    sid = await measured_schedule(runtime, tenant, sim)
    await set_keywords(client, tenant, sid, [k for k in KEYWORDS if k != "epsilon"])
    await measure(runtime, sim, sid, LAST)
    # Added after the last measurement: never measured, so never a row.
    await set_keywords(client, tenant, sid, [*LAST, "omega"])

    filters: list[dict[str, Any]] = [
        {},
        {"device": "mobile"},
        {"device": "desktop", "moved": 2},
        {"moved": 1},
        {"in_top": 3},
        {"out_of_top": 3},
        {"out_of_top": 10, "device": "desktop"},
        {"q": "ta"},
        {"features": "winnable"},
        {"url_issues": True},
    ]
    sorts = ["keyword", "device", "position", "change", "best", "volume", "url"]
    # Three runs shown, and one: the change then compares with the run before the window.
    for columns, some in ((3, filters), (1, filters[:4])):
        everything, _ = await every_page(client, tenant, sid, {"columns": columns}, 1000)
        assert "omega" not in {r["keyword"] for r in everything}
        # By keyword then device, as Python orders str: "zebra" before "éclair".
        assert keys(everything) == sorted(keys(everything))
        assert everything[-1]["keyword"] == "éclair"
        for f, sort, order in itertools.product(some, sorts, ("asc", "desc")):
            params = {**f, "sort": sort, "order": order, "columns": columns}
            want = expected(everything, params)
            got, totals = await every_page(client, tenant, sid, params, 4)
            assert got == want, params
            assert totals == {len(want)}, params


async def test_ties_lost_and_dropped_keywords_in_order(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    sid = await measured_schedule(runtime, tenant, sim)
    await set_keywords(client, tenant, sid, [k for k in KEYWORDS if k != "epsilon"])
    await measure(runtime, sim, sid, LAST)
    url, h = f"{BASE}/schedules/{sid}/positions", auth(tenant)

    async def page(**params: Any) -> list[dict[str, Any]]:
        r = await client.get(url, params={"limit": 100, **params}, headers=h)
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    rows = {(r["keyword"], r["device"]): r for r in await page()}
    # Dropped from the schedule: still a row of the runs it was measured in, without a latest.
    dropped = rows[("epsilon", "desktop")]
    assert (dropped["state"], dropped["position"], dropped["change"]) == (None, None, None)
    assert [c["position"] for c in dropped["cells"]] == [1, None, None]
    assert [c["state"] for c in dropped["cells"]] == ["retrieved", "retrieved", None]
    assert dropped["best"] == 1
    assert rows[("delta shoes", "desktop")]["change"] == "lost"
    assert rows[("gamma", "mobile")]["change"] == "new"

    # Equal positions: by keyword then device, in either direction; no position last in both.
    desktop_asc = keys(await page(sort="position", device="desktop"))
    assert desktop_asc[:2] == [("alpha", "desktop"), ("beta", "desktop")]
    assert desktop_asc[-2:] == [("delta shoes", "desktop"), ("epsilon", "desktop")]
    desktop_desc = keys(await page(sort="position", order="desc", device="desktop"))
    assert desktop_desc[:3] == [("zebra", "desktop"), ("éclair", "desktop"), ("gamma", "desktop")]
    assert desktop_desc[-4:] == [
        ("alpha", "desktop"),
        ("beta", "desktop"),
        ("delta shoes", "desktop"),
        ("epsilon", "desktop"),
    ]
    # The change: gains biggest first, then new, same, unranked, losses, lost; none last.
    by_change = await page(sort="change", device="mobile")
    assert [(r["keyword"], r["change"], r["delta"]) for r in by_change] == [
        ("zebra", "up", 5),
        ("éclair", "up", 5),
        ("beta", "up", 2),
        ("gamma", "new", None),
        ("alpha", "same", 0),
        ("delta shoes", "same", 0),
        ("epsilon", None, None),
    ]

    # A cursor past the end: no rows, the total still counted.
    r = await client.get(url, params={"cursor": "500", "limit": 5}, headers=h)
    assert r.status_code == 200, r.text
    assert (r.json()["items"], r.json()["total"], r.json()["next_cursor"]) == ([], 14, None)
