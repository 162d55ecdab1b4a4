"""Journey analytics over time driven through real runs on the deterministic clock (FN-58 to
FN-60): the daily series per version and node equal what the runs did, conversion windows and
goal rate per version, the comparison of two versions, the CSV export and the date range's
errors."""

from __future__ import annotations

import csv
import io
from typing import Any

from tests.conftest import START, auth
from tests.engines.funnels.factories import (
    Engine,
    contact,
    email_node,
    graph,
    node,
    published,
    republish,
    setup_names,
)
from tests.engines.funnels.outbox.test_unsubscribe import _enrol

D0 = START.date().isoformat()  # 2026-03-02
D1 = "2026-03-03"
D2 = "2026-03-04"


def journey(goal_for_all: bool = False) -> dict[str, Any]:
    """hello → wait 1 day → vip? goal : exit (or straight to the goal)."""
    if goal_for_all:
        return graph(
            email_node("hello", subject="Hi", body="Welcome", next="w"),
            node("wait", "w", days=1, next="g"),
            node("goal", "g"),
            triggers=[{"kind": "manual"}],
        )
    return graph(
        email_node("hello", subject="Hi", body="Welcome", next="w"),
        node("wait", "w", days=1, next="c"),
        node("condition", "c", predicate={"kind": "has_tag", "tag": "vip"}, yes="g", no="x"),
        node("goal", "g"),
        node("exit_funnel", "x"),
        triggers=[{"kind": "manual"}],
    )


def _points(report: dict, version: int, node_id: str | None) -> dict[str, dict[str, int]]:
    [v] = [v for v in report["versions"] if v["version"] == version]
    [n] = [n for n in v["nodes"] if n["node_id"] == node_id]
    return {
        p["day"]: {k: p[k] for k in ("entered", "waiting", "exited", "converted")}
        for p in n["days"]
    }


def _day(entered: int = 0, waiting: int = 0, exited: int = 0, converted: int = 0) -> dict:
    return {"entered": entered, "waiting": waiting, "exited": exited, "converted": converted}


async def _journey_runs(client, runtime, tenant, engine: Engine) -> int:
    """Day 0: three enter (two vip). Day 1: their wait ends (two reach the goal, one exits) and
    two more enter. Day 2: those two exit."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"])
    funnel_id, _ = await published(runtime, ws, journey())
    first = [
        await contact(runtime, ws, "v1@example.com", tags=["vip"]),
        await contact(runtime, ws, "v2@example.com", tags=["vip"]),
        await contact(runtime, ws, "n1@example.com"),
    ]
    for person in first:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    await engine.advance(days=1)
    for email in ("n2@example.com", "n3@example.com"):
        await _enrol(runtime, funnel_id, await contact(runtime, ws, email))
    await engine.drive()
    await engine.advance(days=1)
    return funnel_id


async def test_fn58_daily_series_per_node_equal_what_the_runs_did(
    client, runtime, tenant, engine: Engine
) -> None:
    funnel_id = await _journey_runs(client, runtime, tenant, engine)
    got = await client.get(
        f"/api/v1/funnels/{funnel_id}/analytics/series",
        params={"start": D0, "end": D2},
        headers=auth(tenant),
    )
    assert got.status_code == 200, got.text
    report = got.json()
    assert _points(report, 1, None) == {
        D0: _day(entered=3, waiting=3),
        D1: _day(entered=2, waiting=2, exited=1, converted=2),
        D2: _day(exited=2),
    }
    assert _points(report, 1, "hello") == {
        D0: _day(entered=3),
        D1: _day(entered=2, converted=2),
        D2: _day(),
    }
    # the first three step on the wait again the day it ends; the two newcomers start theirs
    assert _points(report, 1, "w") == {
        D0: _day(entered=3, waiting=3),
        D1: _day(entered=5, waiting=2, converted=2),
        D2: _day(entered=2),
    }
    assert _points(report, 1, "c") == {
        D0: _day(),
        D1: _day(entered=3, converted=2),
        D2: _day(entered=2),
    }
    assert _points(report, 1, "g") == {D0: _day(), D1: _day(entered=2, converted=2), D2: _day()}
    assert _points(report, 1, "x") == {
        D0: _day(),
        D1: _day(entered=1, exited=1),
        D2: _day(entered=2, exited=2),
    }

    # the per-node report (distinct runs) agrees with the days summed for nodes walked once
    funnel = (await client.get(f"/api/v1/funnels/{funnel_id}/report", headers=auth(tenant))).json()
    for n in funnel["versions"][0]["nodes"]:
        if n["node_id"] != "w":
            days = _points(report, 1, n["node_id"])
            assert sum(d["entered"] for d in days.values()) == n["entered"], n["node_id"]
            assert sum(d["exited"] for d in days.values()) == n["exited"], n["node_id"]


async def test_fn60_csv_export_holds_the_same_figures(
    client, runtime, tenant, engine: Engine
) -> None:
    funnel_id = await _journey_runs(client, runtime, tenant, engine)
    got = await client.get(
        f"/api/v1/funnels/{funnel_id}/analytics/series.csv",
        params={"start": D0, "end": D2},
        headers=auth(tenant),
    )
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("text/csv")
    assert "attachment" in got.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert len(rows) == 3 * 6  # (all runs) + five nodes, three days
    by = {(r["node_id"], r["day"]): r for r in rows}
    assert by[("(all runs)", D1)] == {
        "version": "1",
        "node_id": "(all runs)",
        "node_kind": "funnel",
        "day": D1,
        "entered": "2",
        "waiting": "2",
        "exited": "1",
        "converted": "2",
    }
    assert by[("x", D2)]["exited"] == "2"


async def test_fn59_conversion_windows_goal_rate_and_two_versions_compared(
    client, runtime, tenant, engine: Engine
) -> None:
    funnel_id = await _journey_runs(client, runtime, tenant, engine)
    ws = tenant.workspace_id
    await republish(runtime, ws, funnel_id, journey(goal_for_all=True))
    for email in ("m1@example.com", "m2@example.com"):
        await _enrol(runtime, funnel_id, await contact(runtime, ws, email))
    await engine.drive()
    await engine.advance(days=1)

    got = await client.get(
        f"/api/v1/funnels/{funnel_id}/analytics/outcomes",
        params={"windows": "1,7"},
        headers=auth(tenant),
    )
    assert got.status_code == 200, got.text
    v1, v2 = got.json()["versions"]
    assert (v1["version"], v1["entered"], v1["goal_reached"], v1["goal_rate"]) == (1, 5, 2, 0.4)
    assert v1["outcomes"]["exited"] == 3
    assert v1["outcomes"]["completed"] == 2
    # the goal comes exactly one day after entering: inside a 1-day window
    assert [(w["days"], w["converted"]) for w in v1["windows"]] == [(1, 2), (7, 2)]
    assert (v2["entered"], v2["goal_reached"], v2["goal_rate"]) == (2, 2, 1.0)
    assert v1["goal_rate_low"] < 0.4 < v1["goal_rate_high"]

    compared = await client.get(
        f"/api/v1/funnels/{funnel_id}/analytics/compare",
        params={"a": 1, "b": 2},
        headers=auth(tenant),
    )
    assert compared.status_code == 200, compared.text
    c = compared.json()
    assert abs(c["goal_rate_difference"] - 0.6) < 1e-9
    assert abs(c["goal_rate_lift"] - 1.5) < 1e-9
    # 2/2 against 2/5: pooled 4/7, se = √(4/7 · 3/7 · (1/2 + 1/5)) = 0.41404, z = 1.44914,
    # p = erfc(1.44914 / √2) = 0.14730: not significant
    assert abs(c["p_value"] - 0.14730) < 1e-4
    assert c["significant"] is False
    exited = next(o for o in c["outcomes"] if o["outcome"] == "exited")
    assert (exited["a_rate"], exited["b_rate"]) == (0.6, 0.0)

    missing = await client.get(
        f"/api/v1/funnels/{funnel_id}/analytics/compare",
        params={"a": 1, "b": 9},
        headers=auth(tenant),
    )
    assert missing.status_code == 404
    assert "version 9" in missing.text


async def test_fn60_bad_ranges_and_windows_name_the_field(client, runtime, tenant) -> None:
    await setup_names(runtime, tenant.workspace_id, tags=["vip"])
    funnel_id, _ = await published(runtime, tenant.workspace_id, journey())
    for params, field in (
        ({"start": D2, "end": D0}, "start"),
        ({"start": "2024-01-01", "end": D0}, "start"),
        ({"start": "yesterday"}, "start"),
        # the edges of the calendar: refused by name, never an overflow
        ({"end": "0001-01-02"}, "end"),
        ({"start": "9999-12-31", "end": "9999-12-31"}, "start"),
        ({"start": "0001-01-01", "end": "0001-01-01"}, "start"),
    ):
        got = await client.get(
            f"/api/v1/funnels/{funnel_id}/analytics/series", params=params, headers=auth(tenant)
        )
        assert got.status_code in (400, 422), got.text
        assert field in got.text
    for windows in ("0", "a,b", "1,2,3,4,5,6,7,8,9,10,11"):
        got = await client.get(
            f"/api/v1/funnels/{funnel_id}/analytics/outcomes",
            params={"windows": windows},
            headers=auth(tenant),
        )
        assert got.status_code == 422, got.text
        assert "windows" in got.text
    # the default range: the 30 days up to the clock's day
    got = await client.get(f"/api/v1/funnels/{funnel_id}/analytics/series", headers=auth(tenant))
    report = got.json()
    assert (report["start"], report["end"]) == ("2026-02-01", D0)
