"""AR-42 one re-read and one write per object per run, across all of a rule's tasks: the planned
changes of every task on an object are merged into one POST, each task planning from what the
earlier ones planned, after one batched live re-read. AR-43 the stop is asked before reads too:
once a run has seen it, it makes no further Graph call. Calls are counted at the Graph API
simulator over loopback."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from decimal import Decimal
from urllib.parse import parse_qsl

import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    AppendToName,
    Condition,
    IncreaseBudget,
    MetricValueCondition,
    PauseCampaign,
    TaskIn,
)
from app.engines.adrules.stops import StopCheck
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
TAG = TaskIn(name="Tag", conditions=SPENT, action=AppendToName(text="[scaled]"), cooldown="15m")
RAISE = TaskIn(
    name="Raise",
    conditions=SPENT,
    action=IncreaseBudget(by="percent", amount=Decimal("10"), max=Decimal("1000")),
    cooldown="15m",
)
TOP_UP = TaskIn(
    name="Top up",
    conditions=SPENT,
    action=IncreaseBudget(by="amount", amount=Decimal("20"), max=Decimal("70")),
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


def _object_calls(world: GraphWorld) -> list[list[tuple[str, str, object]]]:
    """Batch calls that re-read or wrote objects (not Insights)."""
    return [call for call in world.batch_calls if not any("/insights" in u for _, u, _ in call)]


def _insights_calls(world: GraphWorld) -> int:
    return len(world.batch_calls) - len(_object_calls(world))


async def _records(runtime: Runtime, batch_id: str) -> list[ExecutionRecord]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord)
            .where(ExecutionRecord.batch_id == batch_id)
            .order_by(ExecutionRecord.id)
        )
        return list(rows.all())


async def test_ar42_a_rename_and_a_budget_task_cost_one_re_read_and_one_write_per_object(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 200, daily_budget=5000)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[TAG, RAISE])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    stats = BatchStats()
    deps = dataclasses.replace(make_deps(runtime, clients), write_stats=stats)

    await run_account_job(deps, payload)

    records = await _records(runtime, payload.batch_id)
    assert len(records) == 400
    assert {r.status for r in records} == {"executed"}
    # Every object was written once, with both tasks' fields in the one POST.
    assert world.count("campaign.update") == 200
    assert len(world.updates) == 200
    assert all(set(fields) == {"name", "daily_budget"} for _, fields in world.updates)
    calls = _object_calls(world)
    reads = [c for c in calls if {m for m, _, _ in c} == {"GET"}]
    writes = [c for c in calls if {m for m, _, _ in c} == {"POST"}]
    assert len(calls) == len(reads) + len(writes)
    assert sorted(len(c) for c in reads) == [50, 50, 50, 50]
    assert sorted(len(c) for c in writes) == [50, 50, 50, 50]
    _method, _url, body = writes[0][0]
    assert isinstance(body, str)
    assert dict(parse_qsl(body)) == {"name": "Campaign 1 [scaled]", "daily_budget": "5500"}
    # The measure: HTTP calls (batched re-reads and writes) per written object. Task by
    # task it was 16 calls for these 200 objects (0.08); merged it is 8.
    written = len({cid for cid, _ in world.updates})
    assert len(calls) / written == 0.04 <= 0.05
    assert stats.calls == 8
    campaign = world.campaign(records[0].campaign_id)
    assert (campaign.name, campaign.daily_budget) == ("Campaign 1 [scaled]", 5500)


async def test_ar42_a_later_task_plans_from_what_the_earlier_one_planned(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 3, daily_budget=5000)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[RAISE, TOP_UP, PAUSE])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))

    await run_account_job(make_deps(runtime, clients), payload)

    records = await _records(runtime, payload.batch_id)
    by_task = {(r.task_id, r.campaign_id): r for r in records}
    raise_id, top_up_id, pause_id = setup.tasks[0].id, setup.tasks[1].id, setup.tasks[2].id
    for campaign in world.accounts["act_1001"].campaigns.values():
        first = by_task[(raise_id, campaign.id)]
        second = by_task[(top_up_id, campaign.id)]
        third = by_task[(pause_id, campaign.id)]
        assert (first.before, first.after) == ({"daily_budget": "50.00"}, {"daily_budget": "55.00"})
        # 55 + 20 would be 75: the second task starts from the first one's 55 and stops at 70.
        assert second.before == {"daily_budget": "55.00"}
        assert second.after == {"daily_budget": "70.00", "clamped_at": "max", "projected": "75.00"}
        assert third.after == {"status": "PAUSED"}
        assert (campaign.daily_budget, campaign.effective_status) == (7000, "PAUSED")
    # One write per object: the last budget and the status together.
    assert len(world.updates) == 3
    assert all(
        sorted(fields.items()) == [("daily_budget", "7000"), ("status", "PAUSED")]
        for _, fields in world.updates
    )
    assert len(_object_calls(world)) == 2  # one batched re-read, one batched write


async def test_ar42_a_shadow_rule_plans_the_chain_and_writes_nothing(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 4, daily_budget=5000)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[RAISE, TOP_UP], status="shadow")
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    payload = msgspec.structs.replace(
        payload, rule=msgspec.structs.replace(payload.rule, shadow=True)
    )

    await run_account_job(make_deps(runtime, clients), payload)

    records = await _records(runtime, payload.batch_id)
    assert {r.status for r in records} == {"would_execute"}
    assert {(r.after or {})["daily_budget"] for r in records if r.task_id == setup.tasks[1].id} == {
        "70.00"
    }
    assert world.updates == []
    assert [c for c in _object_calls(world) if {m for m, _, _ in c} == {"POST"}] == []


async def test_ar43_a_stop_seen_during_the_insights_read_ends_every_graph_call(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 200, daily_budget=5000)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[TAG, RAISE])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    # One Insights call at a time (50 campaigns each); the stop goes on once two were made.
    deps = dataclasses.replace(
        make_deps(runtime, clients),
        stop=StopCheck(runtime.db, lambda: len(world.batch_calls) >= 2),
        concurrency=1,
    )

    await run_account_job(deps, payload)

    # Four Insights calls would read the 200 campaigns: after the stop, not one more call.
    assert world.count("batch") == len(world.batch_calls) == 2
    assert world.count("insights") == 100  # the two calls' sub-requests, nothing after
    assert _object_calls(world) == []
    assert world.updates == []
    records = await _records(runtime, payload.batch_id)
    assert len(records) == 400
    assert {r.status for r in records} == {"skipped"}
    assert all((r.reason or "").startswith("platform_stop") for r in records)


async def test_ar43_a_stop_seen_after_the_insights_read_makes_no_re_read(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 120, daily_budget=5000)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[TAG, RAISE])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    # The stop goes on once every Insights call was made (3 for 120 campaigns).
    deps = dataclasses.replace(
        make_deps(runtime, clients),
        stop=StopCheck(runtime.db, lambda: _insights_calls(world) >= 3),
    )

    await run_account_job(deps, payload)

    assert _insights_calls(world) == 3
    assert _object_calls(world) == []  # no live re-read, no write
    assert world.count("batch") == 3
    records = await _records(runtime, payload.batch_id)
    assert len(records) == 240
    assert {r.status for r in records} == {"skipped"}
    assert all((r.reason or "").startswith("platform_stop") for r in records)
    # The skipped records still show what was evaluated.
    assert all(r.conditions and r.conditions[0]["passed"] for r in records)
