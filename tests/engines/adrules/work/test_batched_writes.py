"""Fewer calls on writes (issue 18 item 9, AR-17, spec §7 "Batch"): the live re-reads before budget
and name writes go out as batched GETs and the writes as batched POSTs, at most 50 sub-requests a
call, each POST's parameters as one form-encoded string; a failed item is that campaign's error
only, and unfinished (``null``) or transiently failed items are sent again. Against the Graph API
simulator over loopback."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from decimal import Decimal
from urllib.parse import parse_qsl

import pytest
from sqlalchemy import select

from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    Condition,
    IncreaseBudget,
    MetricValueCondition,
    PauseCampaign,
    TaskIn,
)
from app.engines.adrules.work.account import run_account_job
from app.engines.adrules.work.batched import BatchStats
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    Workspace,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)

SPENT: list[Condition] = [
    MetricValueCondition(metric="spend", period="today", operator="gte", value=Decimal("0"))
]
RAISE = TaskIn(
    name="Raise",
    conditions=SPENT,
    action=IncreaseBudget(by="percent", amount=Decimal("10"), max=Decimal("1000")),
    cooldown="15m",
)
PAUSE = TaskIn(name="Pause", conditions=SPENT, action=PauseCampaign(), cooldown="15m")


@pytest.fixture
async def sim(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


async def _records(runtime: Runtime, batch_id: str) -> dict[str, ExecutionRecord]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord).where(ExecutionRecord.batch_id == batch_id)
        )
        return {r.campaign_id: r for r in rows.all()}


def _write_calls(world: GraphWorld) -> list[list[tuple[str, str, object]]]:
    """Batch calls that carried object reads or writes (not Insights)."""
    return [call for call in world.batch_calls if not any("/insights" in url for _, url, _ in call)]


async def test_budget_raise_on_120_campaigns_costs_3_read_calls_and_3_write_calls(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 120, daily_budget=5000)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[RAISE])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    stats = BatchStats()
    deps = dataclasses.replace(make_deps(runtime, clients), write_stats=stats)

    await run_account_job(deps, payload)

    records = await _records(runtime, payload.batch_id)
    assert len(records) == 120
    assert {r.status for r in records.values()} == {"executed"}
    assert {r.after["daily_budget"] for r in records.values() if r.after} == {"55.00"}
    assert {c.daily_budget for c in world.accounts["act_1001"].campaigns.values()} == {5500}
    calls = _write_calls(world)
    reads = [c for c in calls if {m for m, _, _ in c} == {"GET"}]
    writes = [c for c in calls if {m for m, _, _ in c} == {"POST"}]
    assert len(calls) == len(reads) + len(writes)  # no call mixes reads and writes
    assert sorted(len(c) for c in reads) == [20, 50, 50]
    assert sorted(len(c) for c in writes) == [20, 50, 50]
    assert (stats.calls, stats.items) == (6, 240)
    assert world.count("campaign.update") == 120
    # Each write's parameters travel as one form-encoded string, as Meta's batch API takes them.
    _method, url, body = writes[0][0]
    assert isinstance(body, str)
    assert dict(parse_qsl(body)) == {"daily_budget": "5500"}
    assert url.startswith("v21.0/")
    # Call cost per written object: 6 calls for 120 objects (0.05), against 2 per object singly.
    assert stats.calls / len(records) == 0.05


async def test_a_failed_item_records_that_campaign_only_and_unfinished_items_are_sent_again(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    campaigns = world.add_campaigns("act_1001", 8)
    broken, flaky = campaigns[2].id, campaigns[5].id
    # One object refuses the write for good; another fails once with a transient error.
    world.fail(
        f"campaign.update:{broken}", code=100, status=400, message="(#100) Invalid", times=-1
    )
    world.fail(f"campaign.update:{flaky}", code=2, status=500, times=1)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[PAUSE])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    stats = BatchStats()
    deps = dataclasses.replace(make_deps(runtime, clients), write_stats=stats)

    await run_account_job(deps, payload)

    records = await _records(runtime, payload.batch_id)
    assert records[broken].status == "error"
    assert "(#100) Invalid" in (records[broken].reason or "")
    assert {r.status for cid, r in records.items() if cid != broken} == {"executed"}
    assert world.campaign(broken).effective_status == "ACTIVE"
    assert world.campaign(flaky).effective_status == "PAUSED"
    # One call for the 8 writes, one more carrying only the transiently failed item.
    writes = _write_calls(world)
    assert [len(c) for c in writes] == [8, 1]
    assert writes[1][0][1].endswith(flaky)
    assert stats.retried_items == 1


async def test_items_meta_did_not_reach_before_its_timeout_are_sent_again(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 5)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[PAUSE])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    deps = make_deps(runtime, clients)
    # Meta's batch timeout on the write call: its last two items come back null, not done.
    world.null_write_items = 2

    await run_account_job(deps, payload)

    records = await _records(runtime, payload.batch_id)
    assert {r.status for r in records.values()} == {"executed"}
    assert {c.effective_status for c in world.accounts["act_1001"].campaigns.values()} == {"PAUSED"}
    writes = _write_calls(world)
    assert [len(c) for c in writes] == [5, 2]
