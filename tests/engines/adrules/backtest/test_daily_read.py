"""AR-26 daily Insights for a backtest: the simulator answers ``time_range`` with
``time_increment=1`` as Meta documents it (one row per object and day, ``date_start`` =
``date_stop``, cursor paging, 37 months of retention), and the backtest's reader gets every row at
ad-set level in one batch call, following ``paging.next`` through short and empty pages."""

from __future__ import annotations

from datetime import date
from typing import Any

import httpx
import msgspec

from app.engines.adrules.backtest.daily import read_daily
from app.integrations.meta.reader import MetaReader
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import TOKEN, make_clients


def _world(world: GraphWorld) -> None:
    world.today = date(2026, 3, 2)
    world.add_account("act_3001", "Sets", timezone_name="Europe/Paris")
    world.grant(TOKEN, "act_3001")
    world.add_campaigns("act_3001", 1, daily_budget=None)
    for n in (1, 2, 3):
        child = world.add_child(
            "act_3001", "adsets", f"90{n}", campaign_id="30010001", daily_budget=2000
        )
        child.delivering = False
        child.daily = {
            f"2026-02-{d:02d}": {"spend": f"{n}.{d:02d}", "impressions": "100"}
            for d in range(20, 25)
            if not (n == 3 and d == 22)  # no delivery that day
        }


async def _get(world: GraphWorld, **params: Any) -> httpx.Response:
    query = {"access_token": TOKEN, **params}
    async with httpx.AsyncClient() as http:
        return await http.get(f"{world.base_url}/v21.0/act_3001/insights", params=query)


async def test_ar26_the_simulator_serves_daily_rows_for_a_past_range_as_documented(
    world: GraphWorld,
) -> None:
    _world(world)
    r = await _get(
        world,
        level="adset",
        time_range=msgspec.json.encode({"since": "2026-02-20", "until": "2026-02-24"}).decode(),
        time_increment="1",
        fields="spend,adset_id",
        limit="4",
    )
    assert r.status_code == 200, r.text
    rows: list[dict[str, Any]] = []
    page = r.json()
    async with httpx.AsyncClient() as http:
        while True:
            rows += page["data"]
            nxt = page["paging"].get("next")
            if not nxt:
                break
            page = (await http.get(nxt)).json()
    assert len(rows) == 14  # 3 ad sets × 5 days, one without delivery
    assert all(row["date_start"] == row["date_stop"] for row in rows)
    assert {(row["adset_id"], row["date_start"], row["spend"]) for row in rows} >= {
        ("901", "2026-02-20", "1.20"),
        ("903", "2026-02-24", "3.24"),
    }
    assert ("903", "2026-02-22") not in {(row["adset_id"], row["date_start"]) for row in rows}

    old = await _get(
        world,
        level="adset",
        time_range='{"since": "2023-01-01", "until": "2023-01-02"}',
        time_increment="1",
    )
    assert old.status_code == 400
    assert old.json()["error"]["code"] == 3018  # beyond the 37 months Meta keeps
    reversed_ = await _get(
        world,
        level="adset",
        time_range='{"since": "2026-02-24", "until": "2026-02-20"}',
        time_increment="1",
    )
    assert reversed_.status_code == 400
    assert reversed_.json()["error"]["code"] == 100


async def test_ar26_the_reader_gets_every_daily_row_in_one_batch_call_following_paging(
    world: GraphWorld,
) -> None:
    _world(world)
    world.page_sizes = [3, 0, 5]  # a short page, an empty one that still announces more, …
    clients = make_clients(world.base_url)
    world.state.reset_counts()
    try:
        read = await read_daily(
            MetaReader(clients.graph, TOKEN),
            "act_3001",
            level="adset",
            object_ids=["901", "902", "903"],
            statuses=["ACTIVE"],
            fields=["spend"],
            since=date(2026, 2, 20),
            until=date(2026, 2, 24),
        )
    finally:
        await clients.aclose()
    assert not read.errors
    assert read.rows_read == 14
    assert sorted(read.rows["903"]) == [
        date(2026, 2, 20),
        date(2026, 2, 21),
        date(2026, 2, 23),
        date(2026, 2, 24),
    ]
    assert str(read.rows["902"][date(2026, 2, 23)].spend) == "2.23"
    assert read.stats.calls == 1  # one batch call carried the request
    assert read.pages_followed == 3  # the pages after the first, empty one included
    assert read.calls == 4
    filtering = world.insights_filters_seen[0]  # the batch item (the pages repeat it)
    assert {f["field"] for f in filtering} == {"adset.id", "adset.effective_status"}
