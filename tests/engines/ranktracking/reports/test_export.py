"""CSV exports of the positions table and of the run log: their content, the filters of the table
applied, and text cells that begin with ``=``, ``+``, ``-`` or ``@`` neutralised against formula
injection (numbers stay numbers)."""

from __future__ import annotations

import csv
import io

import httpx

from app.engines.ranktracking.reports.export import csv_text, neutralise
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import (
    DOMAIN,
    fund,
    make_schedule,
    measure,
    seeded_schedule,
)
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


def parse(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_neutralise_formula_starts_only_in_text() -> None:
    assert [neutralise(v) for v in ("=1+2", "+A1", "-2+3", "@SUM(A1)", "\t=x", "ok", None)] == [
        "'=1+2",
        "'+A1",
        "'-2+3",
        "'@SUM(A1)",
        "'\t=x",
        "ok",
        "",
    ]
    assert neutralise(-2) == -2
    assert parse(csv_text(["a"], [["=cmd|' /C calc'!A0"], [-3]])) == [
        ["a"],
        ["'=cmd|' /C calc'!A0"],
        ["-3"],
    ]


async def test_positions_csv_follows_the_table_and_neutralises(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    h = auth(tenant)
    r = await client.get(f"{BASE}/schedules/{schedule.id}/positions.csv", headers=h)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert f"positions-{schedule.id}.csv" in r.headers["content-disposition"]
    rows = parse(r.text)
    header = rows[0]
    assert header[:4] == ["keyword", "device", "location_code", "location_name"]
    assert header[-8:] == [
        "position",
        "change",
        "delta",
        "best",
        "url",
        "volume",
        "features",
        "owned_features",
    ]
    assert len(header) == 4 + 3 + 8  # three measured runs, dated
    assert all(len(h) == 16 and h[4] == "-" for h in header[4:7])
    body = {(row[0], row[1]): row for row in rows[1:]}
    assert len(body) == 6
    red_desktop = body[("red shoes", "desktop")]
    assert red_desktop[2:4] == ["2840", "United States"]  # RT-63: the location's name
    assert red_desktop[4:7] == ["5", "2", "4"]
    assert red_desktop[7:11] == ["4", "down", "-2", "2"]  # a negative number is not neutralised
    assert DOMAIN in red_desktop[11]
    assert body[("green shoes", "desktop")][7:11] == ["", "lost", "", "3"]

    r = await client.get(
        f"{BASE}/schedules/{schedule.id}/positions.csv",
        params={"device": "mobile", "sort": "position"},
        headers=h,
    )
    assert [row[0] for row in parse(r.text)[1:]] == ["red shoes", "green shoes", "blue shoes"]
    r = await client.get(f"{BASE}/schedules/{schedule.id}/positions.csv?in_top=4", headers=h)
    assert r.status_code == 422

    # Keywords that a spreadsheet would run as formulas are exported as text.
    await fund(runtime, tenant, 1000)
    hostile = ["=hyperlink(x)", "+sum(1)", "-1+1", "@cmd", "plain"]
    other = await make_schedule(runtime, tenant, name="Hostile", keywords=hostile)
    await measure(runtime, sim, other.id, {"=hyperlink(x)": (2, None)})
    r = await client.get(f"{BASE}/schedules/{other.id}/positions.csv", headers=h)
    keywords = sorted(row[0] for row in parse(r.text)[1:])
    assert keywords == sorted(["'=hyperlink(x)", "'+sum(1)", "'-1+1", "'@cmd", "plain"])
    row = next(r for r in parse(r.text)[1:] if r[0] == "'=hyperlink(x)")
    assert (row[4], row[5], row[6]) == ("2", "2", "new")


async def test_log_csv_has_every_child_run(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    r = await client.get(f"{BASE}/schedules/{schedule.id}/log.csv", headers=auth(tenant))
    assert r.status_code == 200, r.text
    rows = parse(r.text)
    assert rows[0][:9] == [
        "request",
        "trigger",
        "queue",
        "created_at",
        "run",
        "device",
        "location_code",
        "location_name",
        "status",
    ]
    assert len(rows) == 1 + 3 * 2
    assert {row[5] for row in rows[1:]} == {"desktop", "mobile"}
    assert {(row[6], row[7]) for row in rows[1:]} == {("2840", "United States")}  # RT-63
    assert {row[8] for row in rows[1:]} == {"succeeded"}
    assert [int(row[0]) for row in rows[1:]] == sorted(
        (int(row[0]) for row in rows[1:]), reverse=True
    )
    assert all(row[9:12] == ["3", "3", "0"] for row in rows[1:])
    r = await client.get(f"{BASE}/schedules/{schedule.id}/log.csv")
    assert r.status_code == 401
