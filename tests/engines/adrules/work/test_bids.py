"""AR-40 bids and cost caps: at ad-set level a rule sets, raises or lowers Meta's ``bid_amount`` —
the bid cap of ``LOWEST_COST_WITH_BID_CAP`` or the cost per result goal of ``COST_CAP``, the ad
set's own strategy or its campaign's when the campaign holds the budget — clamped at the task's
maximum or minimum; an ad set whose strategy holds no amount is skipped with the reason. The rule
document refuses a bid action at another level, or without its clamp, in plain words; the Graph
API simulator takes and refuses bid writes as Meta documents them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.claim.dispatch import dispatch_now
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.work.account import run_account_job
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.sandbox.meta.world import SimReply
from app.scheduling.models import Job
from tests.engines.adrules.factories import (
    TOKEN,
    Clients,
    Workspace,
    create_account,
    dispatch_deps,
    make_clients,
    make_deps,
    store_token,
)

SPENT = [{"type": "metric_value", "metric": "spend", "operator": "gte", "value": "0"}]


def _task(action: dict[str, Any]) -> dict[str, Any]:
    return {"name": "Bids", "conditions": SPENT, "action": action, "cooldown": "1h"}


@pytest.fixture
async def clients(world: GraphWorld) -> AsyncIterator[Clients]:
    made = make_clients(world.base_url)
    yield made
    await made.aclose()


@pytest.fixture
async def bidding_account(runtime: Runtime, ws: Workspace, world: GraphWorld) -> int:
    """Ad sets bidding four ways: a cost cap, a bid cap and no cap under a campaign without a
    budget (each ad set its own strategy), and one under a campaign that holds the budget and the
    strategy (cost cap)."""
    world.add_account("act_3001", "Shop", currency="USD", timezone_name="UTC")
    own, pooled = world.add_campaigns("act_3001", 2, daily_budget=None)
    pooled.daily_budget = 20_000
    pooled.bid_strategy = "COST_CAP"
    for object_id, strategy, bid in (
        ("501", "COST_CAP", 1000),
        ("502", "LOWEST_COST_WITH_BID_CAP", 2500),
        ("503", "LOWEST_COST_WITHOUT_CAP", None),
    ):
        adset = world.add_child("act_3001", "adsets", object_id, campaign_id=own.id)
        adset.daily_budget, adset.bid_strategy, adset.bid_amount = 5000, strategy, bid
    inherited = world.add_child("act_3001", "adsets", "504", campaign_id=pooled.id)
    inherited.bid_amount = 1800
    world.add_child("act_3001", "ads", "601", campaign_id=own.id)
    world.grant(TOKEN, "act_3001")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_3001")
    await store_token(runtime, ws.workspace_id)
    return account.id


async def _rule(client: Any, ws: Workspace, account_id: int, level: str, task: Any) -> Any:
    body = {
        "name": f"Bids at {level} level",
        "status": "active",
        "level": level,
        "account_ids": [account_id],
        "schedule": {"mode": "interval", "minutes": 60},
        "tasks": [task],
    }
    return await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)


async def _run(
    runtime: Runtime, graph: GraphClient, clients: Clients, ws: Workspace, rule_id: int
) -> dict[str, ExecutionRecord]:
    summary = await dispatch_now(
        dispatch_deps(runtime, graph=graph),
        workspace_id=ws.workspace_id,
        rule_id=rule_id,
        now=runtime.clock.now(),
    )
    async with runtime.db.read() as session:
        rows = (await session.scalars(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).all()
    payloads = [msgspec.json.decode(r.payload, type=RunAccountPayload) for r in rows]
    [payload] = [p for p in payloads if p.batch_id == summary.batch_ids[0]]
    await run_account_job(make_deps(runtime, clients), payload)
    async with runtime.db.read() as session:
        records = await session.scalars(
            select(ExecutionRecord).where(ExecutionRecord.batch_id == payload.batch_id)
        )
        return {r.campaign_id: r for r in records.all()}


async def test_ar40_raising_bid_caps_and_cost_caps_with_the_maximum(
    client: Any,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    clients: Clients,
    bidding_account: int,
) -> None:
    task = _task({"type": "increase_bid", "by": "percent", "amount": "20", "max": "25"})
    created = await _rule(client, ws, bidding_account, "adset", task)
    assert created.status_code == 201, created.text
    assert created.json()["tasks"][0]["action"]["strategy"] == "any"

    records = await _run(runtime, graph, clients, ws, created.json()["id"])

    assert records["501"].status == "executed"
    assert records["501"].before == {"bid_amount": "10.00", "bid_strategy": "COST_CAP"}
    assert records["501"].after == {"bid_amount": "12.00", "bid_strategy": "COST_CAP"}
    # The ad set under a campaign holding the budget follows the campaign's cost cap strategy.
    assert records["504"].after == {"bid_amount": "21.60", "bid_strategy": "COST_CAP"}
    assert records["502"].status == "not_executed"
    assert records["502"].reason == "the bid cap 25.00 is already at or above the maximum 25"
    assert records["503"].status == "skipped"
    assert (records["503"].reason or "").startswith("bid_strategy_without_cap")
    assert "LOWEST_COST_WITHOUT_CAP" in (records["503"].reason or "")
    adsets = world.accounts["act_3001"].adsets
    assert [adsets[i].bid_amount for i in ("501", "502", "503", "504")] == [1200, 2500, None, 2160]
    assert sorted(world.updates) == [
        ("501", {"bid_amount": "1200"}),
        ("504", {"bid_amount": "2160"}),
    ]


async def test_ar40_lowering_cost_caps_only_stops_at_the_minimum(
    client: Any,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    clients: Clients,
    bidding_account: int,
) -> None:
    task = _task(
        {"type": "decrease_bid", "by": "amount", "amount": "5", "min": "8", "strategy": "cost_cap"}
    )
    created = await _rule(client, ws, bidding_account, "adset", task)
    assert created.status_code == 201, created.text

    records = await _run(runtime, graph, clients, ws, created.json()["id"])

    assert records["501"].after == {
        "bid_amount": "8.00",
        "bid_strategy": "COST_CAP",
        "clamped_at": "min",
        "projected": "5.00",
    }
    assert records["504"].after == {"bid_amount": "13.00", "bid_strategy": "COST_CAP"}
    assert records["502"].status == "skipped"
    assert (records["502"].reason or "").startswith("bid_strategy_not_targeted")
    assert "cost cap amounts only" in (records["502"].reason or "")
    assert world.accounts["act_3001"].adsets["502"].bid_amount == 2500


async def test_ar40_the_rule_document_refuses_bids_in_plain_words(
    client: Any, ws: Workspace, bidding_account: int
) -> None:
    at_campaign = await _rule(
        client, ws, bidding_account, "campaign", _task({"type": "set_bid", "amount": "12"})
    )
    assert at_campaign.status_code == 422
    text = at_campaign.text
    assert "tasks[0].action" in text
    assert "bid_not_at_level" in text
    assert "use a rule at ad-set level" in text
    at_ad = await _rule(
        client, ws, bidding_account, "ad", _task({"type": "set_bid", "amount": "12"})
    )
    assert at_ad.status_code == 422
    assert "bid_not_at_level" in at_ad.text

    no_max = await _rule(
        client, ws, bidding_account, "adset", _task({"type": "increase_bid", "amount": "10"})
    )
    assert no_max.status_code == 422
    assert "tasks[0].action.max" in no_max.text
    assert "a bid increase needs a maximum bid" in no_max.text
    zero_floor = await _rule(
        client,
        ws,
        bidding_account,
        "adset",
        _task({"type": "decrease_bid", "amount": "10", "min": "0"}),
    )
    assert zero_floor.status_code == 422
    assert "tasks[0].action.min" in zero_floor.text
    assert "Meta refuses a bid of 0" in zero_floor.text
    bad_target = await _rule(
        client,
        ws,
        bidding_account,
        "adset",
        _task({"type": "set_bid", "amount": "10", "strategy": "roas"}),
    )
    assert bad_target.status_code in (400, 422)
    assert "strategy" in bad_target.text


def _post(world: GraphWorld, object_id: str, **fields: str) -> SimReply:
    reply = world.handle("POST", f"v21.0/{object_id}", dict(fields), TOKEN)
    assert isinstance(reply, SimReply)
    return reply


async def test_ar40_the_simulator_takes_and_refuses_bid_writes_as_meta_documents(
    world: GraphWorld, bidding_account: int
) -> None:
    own, pooled = world.accounts["act_3001"].campaigns
    assert _post(world, "501", bid_amount="1500").status == 200
    refused = {
        "no amount on a strategy without a cap": _post(world, "503", bid_amount="1000"),
        "a campaign has no bid_amount": _post(world, own, bid_amount="1000"),
        "an ad has no bid_amount": _post(world, "601", bid_amount="1000"),
        "a bid of 0": _post(world, "501", bid_amount="0"),
        "strategy on an ad set whose campaign holds it": _post(
            world, "504", bid_strategy="LOWEST_COST_WITH_BID_CAP"
        ),
        "strategy on a campaign without a budget": _post(world, own, bid_strategy="COST_CAP"),
        "a capped strategy without an amount": _post(
            world, "503", bid_strategy="LOWEST_COST_WITH_BID_CAP"
        ),
    }
    for what, reply in refused.items():
        assert reply.status == 400, what
        assert reply.body["error"]["code"] == 100, what
    assert (
        "LOWEST_COST_WITHOUT_CAP"
        in refused["no amount on a strategy without a cap"].body["error"]["message"]
    )
    # A campaign holding the budget takes a new strategy; its ad sets follow it.
    assert _post(world, pooled, bid_strategy="LOWEST_COST_WITH_BID_CAP").status == 200
    read = world.handle("GET", "v21.0/504", {"fields": "bid_strategy,bid_amount"}, TOKEN)
    assert isinstance(read, SimReply)
    assert read.body == {
        "id": "504",
        "bid_strategy": "LOWEST_COST_WITH_BID_CAP",
        "bid_amount": 1800,
    }
    assert _post(world, "503", bid_strategy="COST_CAP", bid_amount="900").status == 200
    assert [u for u, _ in world.updates] == ["501", pooled, "503"]
