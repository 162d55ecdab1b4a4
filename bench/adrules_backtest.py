"""Ad rules backtest benchmark: a 30-day backtest of a two-task rule over 500 campaigns of one ad
account, against the Graph API simulator on loopback.

The backtest's own code path, piece by piece as its service runs it: the campaign listing
(``fetch_campaigns``), the daily Insights read (``read_daily``: account-level Insights with
``time_increment=1``, 37 day windows packed into Graph batch calls, every ``paging.next``
followed) and the pure replay (``replay``: conditions, cooldowns, clamps, guard per object and
day). Printed: Graph HTTP calls, Insights rows, the CPU time of the backtest's thread for the read
(HTTP client and decoding) and for the replay, and wall time. The baseline, measured in the same
run: the CPU time to only decode the same Insights rows (the simulator's answers rendered in
process, decoded with the same decoder), the floor of any backtest that reads them.

Targets: ≤ 15 Graph calls and ≤ 5 s of CPU.

Run: ``.venv/bin/python bench/adrules_backtest.py`` (``--campaigns``, ``--days`` change the size).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec

from app.engines.adrules.backtest.daily import PAGE_SIZE, _page, plan_requests, read_daily
from app.engines.adrules.backtest.replay import ReplayInput, replay
from app.engines.adrules.backtest.window import lookback_start
from app.engines.adrules.claim.fetch import fetch_campaigns
from app.engines.adrules.schemas import (
    IncreaseBudget,
    MetricValueCondition,
    PauseCampaign,
    TaskDocument,
)
from app.engines.adrules.work.insights import plan_insights
from app.integrations.meta.client import GraphClient
from app.integrations.meta.reader import MetaReader
from app.sandbox.meta import GraphWorld, serve_world

TOKEN = "bench-token-0123456789"
ACCOUNT = "act_7001"
ZONE = "Europe/Berlin"
TASKS = [
    TaskDocument(
        id=1,
        name="Pause losers",
        conditions=[
            MetricValueCondition(metric="spend", period="today", operator="gt", value=Decimal(20)),
            MetricValueCondition(
                metric="purchase_roas", period="last_7d", operator="lt", value=Decimal("1.5")
            ),
        ],
        group="and",
        action=PauseCampaign(),
        cooldown="24h",
    ),
    TaskDocument(
        id=2,
        name="Scale winners",
        conditions=[
            MetricValueCondition(
                metric="purchase_roas", period="last_3d", operator="gt", value=Decimal(3)
            ),
            MetricValueCondition(metric="cpc", period="yesterday", operator="lt", value=Decimal(1)),
        ],
        group="and",
        action=IncreaseBudget(by="percent", amount=Decimal(20), max=Decimal(200)),
        cooldown="24h",
    ),
]


async def _no_wait(_: float) -> None:
    return None


def _decode_baseline(world: GraphWorld, requests: list) -> tuple[float, int]:
    """CPU seconds to decode the same rows, rendered by the simulator in process (no HTTP)."""
    bodies = []
    for request in requests:
        params = {
            k: (
                msgspec.json.encode(v).decode()
                if isinstance(v, dict | list) and k != "fields"
                else v
            )
            for k, v in request.get.params.items()
        }
        params["fields"] = ",".join(request.get.params["fields"])
        params = {k: str(v) for k, v in params.items()}
        reply = world.handle("GET", f"v21.0/{request.get.path}", params, TOKEN)
        bodies.append(msgspec.json.encode(reply.body))
    started = time.thread_time()
    rows = sum(len(_page.decode(body).data) for body in bodies)
    return time.thread_time() - started, rows


async def main(campaigns: int, days: int) -> None:
    world = GraphWorld()
    server = serve_world(world)
    today = date(2026, 3, 2)
    world.today = today
    world.add_account(ACCOUNT, "Bench", timezone_name=ZONE)
    world.grant(TOKEN, ACCOUNT)
    world.add_campaigns(ACCOUNT, campaigns)
    for campaign in world.accounts[ACCOUNT].campaigns.values():
        campaign.created_time = datetime(2025, 1, 1, tzinfo=UTC)
    until = today - timedelta(days=1)
    since = until - timedelta(days=days - 1)
    plan = plan_insights(TASKS)
    data_since = lookback_start(set(plan.periods), since)
    fields = sorted({f for fs in plan.fields.values() for f in fs} | {"spend"})
    graph = GraphClient(world.base_url, "v21.0", timeout_seconds=30)
    reader = MetaReader(graph, TOKEN)
    try:
        world.state.reset_counts()
        wall = time.perf_counter()
        cpu = time.thread_time()
        fetched = await fetch_campaigns(reader, ACCOUNT, [], sleep=_no_wait)
        objects = fetched.campaigns
        read = await read_daily(
            reader,
            ACCOUNT,
            level="campaign",
            object_ids=[o.id for o in objects],
            statuses=sorted({o.effective_status for o in objects}),
            fields=fields,
            since=data_since,
            until=until,
            sleep=_no_wait,
        )
        read_cpu = time.thread_time() - cpu
        calls = fetched.attempts + read.calls
        served = world.state.count("*")
        cpu = time.thread_time()
        replayed = replay(
            ReplayInput(
                rule_id=1,
                rule_name="Bench",
                level="campaign",
                tasks=TASKS,
                objects=objects,
                rows=read.rows,
                currency="USD",
                day_zone=ZONE,
                clock_zone=ZONE,
                days=[since + timedelta(days=i) for i in range(days)],
                data_since=data_since,
            )
        )
        replay_cpu = time.thread_time() - cpu
        wall = time.perf_counter() - wall
    finally:
        await graph.aclose()
    requests = plan_requests(
        ACCOUNT,
        level="campaign",
        object_ids=[o.id for o in objects],
        statuses=sorted({o.effective_status for o in objects}),
        fields=fields,
        since=data_since,
        until=until,
    )
    decode_cpu, decoded_rows = _decode_baseline(world, requests)
    server.stop()
    total_cpu = read_cpu + replay_cpu
    print(
        f"backtest: {campaigns} campaigns × {days} days ({since} … {until}), data from {data_since}"
    )
    print(f"  Insights rows read        {read.rows_read:>9,}  (baseline decoded {decoded_rows:,})")
    print(f"  sub-requests              {len(requests):>9}  ({PAGE_SIZE} rows a page)")
    print(
        f"  Graph HTTP calls          {calls:>9}  (the simulator served {served} requests, batch items included; target ≤ 15)"
    )
    print(f"  evaluations / matches     {replayed.evaluations:>9,} / {replayed.matches:,}")
    print(f"  would-be actions          {len(replayed.actions):>9,}")
    print(f"  CPU read (client+decode)  {read_cpu:>9.3f} s")
    print(f"  CPU replay                {replay_cpu:>9.3f} s")
    print(f"  CPU backtest total        {total_cpu:>9.3f} s  (target ≤ 5 s)")
    print(
        f"  baseline: decode only     {decode_cpu:>9.3f} s  ({total_cpu / decode_cpu:.1f}× of it)"
    )
    print(f"  wall                      {wall:>9.3f} s")
    if calls > 15 or total_cpu > 5:
        print("  TARGET MISSED")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=500)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.campaigns, args.days))
