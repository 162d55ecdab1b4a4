"""Ad sets and ads (issue 18 item 6, AR-11, AR-14, AR-17, AR-18): a rule chooses its level —
campaign, ad set or ad — and lists, reads Insights for and acts on the objects of that level, one
record per object, task and run. Ad-set budgets (daily and lifetime) on an account that budgets on
ad sets; a campaign-level budget action there is skipped, pointing at the ad-set level; pause at ad
level. Through the dispatcher and the worker, against the Graph API simulator over loopback."""

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
RAISE = {
    "name": "Scale",
    "conditions": SPENT,
    "action": {"type": "increase_budget", "by": "percent", "amount": "50", "max": "100"},
    "cooldown": "1h",
}
PAUSE = {
    "name": "Stop",
    "conditions": SPENT,
    "action": {"type": "pause_campaign"},
    "cooldown": "1h",
}


@pytest.fixture
async def clients(world: GraphWorld) -> AsyncIterator[Clients]:
    made = make_clients(world.base_url)
    yield made
    await made.aclose()


@pytest.fixture
async def ad_set_account(runtime: Runtime, ws: Workspace, world: GraphWorld) -> int:
    """An account that budgets on ad sets: its campaigns have no budget, their ad sets do."""
    world.add_account("act_2001", "Shop", currency="USD", timezone_name="UTC")
    world.add_campaigns("act_2001", 2, daily_budget=None)
    first, second = list(world.accounts["act_2001"].campaigns)
    world.add_child("act_2001", "adsets", "301", campaign_id=first, daily_budget=5000)
    world.add_child("act_2001", "adsets", "302", campaign_id=first, daily_budget=9000)
    world.add_child("act_2001", "adsets", "303", campaign_id=second, lifetime_budget=6000)
    for n in range(3):
        world.add_child("act_2001", "ads", f"40{n}", campaign_id=first)
    world.grant(TOKEN, "act_2001")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_2001")
    await store_token(runtime, ws.workspace_id)
    return account.id


async def _rule(client: Any, ws: Workspace, account_id: int, level: str, task: Any) -> Any:
    body = {
        "name": f"At {level} level",
        "status": "active",
        "level": level,
        "account_ids": [account_id],
        "schedule": {"mode": "interval", "minutes": 60},
        "tasks": [task],
    }
    return await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)


async def _run(
    runtime: Runtime, graph: GraphClient, clients: Clients, ws: Workspace, rule_id: int
) -> str:
    """Dispatch the rule once and run its account job; the batch id."""
    summary = await dispatch_now(
        dispatch_deps(runtime, graph=graph),
        workspace_id=ws.workspace_id,
        rule_id=rule_id,
        now=runtime.clock.now(),
    )
    assert summary.jobs == 1
    async with runtime.db.read() as session:
        rows = (await session.scalars(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).all()
    payloads = [msgspec.json.decode(r.payload, type=RunAccountPayload) for r in rows]
    [payload] = [p for p in payloads if p.batch_id == summary.batch_ids[0]]
    await run_account_job(make_deps(runtime, clients), payload)
    return payload.batch_id


async def _records(runtime: Runtime, batch_id: str) -> dict[str, ExecutionRecord]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord).where(ExecutionRecord.batch_id == batch_id)
        )
        return {r.campaign_id: r for r in rows.all()}


async def test_ad_set_level_raises_ad_set_budgets_with_the_clamp(
    client: Any,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    clients: Clients,
    ad_set_account: int,
) -> None:
    created = await _rule(client, ws, ad_set_account, "adset", RAISE)
    assert created.status_code == 201, created.text
    assert created.json()["level"] == "adset"

    records = await _records(runtime, await _run(runtime, graph, clients, ws, created.json()["id"]))

    # One record per ad set (the level's objects, listed from the ad sets edge).
    assert set(records) == {"301", "302", "303"}
    assert {r.status for r in records.values()} == {"executed"}
    assert records["301"].after == {"daily_budget": "75.00"}
    assert records["302"].after == {
        "daily_budget": "100.00",
        "clamped_at": "max",
        "projected": "135.00",
    }
    # An ad set on a lifetime budget gets its lifetime budget raised.
    assert (records["303"].before, records["303"].after) == (
        {"lifetime_budget": "60.00"},
        {"lifetime_budget": "90.00"},
    )
    adsets = world.accounts["act_2001"].adsets
    assert (adsets["301"].daily_budget, adsets["302"].daily_budget) == (7500, 10000)
    assert adsets["303"].lifetime_budget == 9000
    assert all(r.conditions[0]["passed"] for r in records.values())
    assert {c.daily_budget for c in world.accounts["act_2001"].campaigns.values()} == {None}
    # Insights were read for the ad sets themselves.
    reads = [u for call in world.batch_calls for _, u, _ in call if "/insights" in u]
    assert {u.split("/")[1] for u in reads} == {"301", "302", "303"}


async def test_a_campaign_budget_action_where_ad_sets_hold_the_budget_is_skipped(
    client: Any,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    clients: Clients,
    ad_set_account: int,
) -> None:
    created = await _rule(client, ws, ad_set_account, "campaign", RAISE)
    assert created.status_code == 201, created.text

    records = await _records(runtime, await _run(runtime, graph, clients, ws, created.json()["id"]))

    assert len(records) == 2
    for record in records.values():
        assert record.status == "skipped"
        assert (record.reason or "").startswith("budget_on_ad_sets")
        assert "ad-set level" in (record.reason or "")
    assert world.updates == []


async def test_ad_level_pauses_ads_and_refuses_budget_actions(
    client: Any,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    clients: Clients,
    ad_set_account: int,
) -> None:
    refused = await _rule(client, ws, ad_set_account, "ad", RAISE)
    assert refused.status_code == 422
    assert "budget_not_at_level" in refused.text
    created = await _rule(client, ws, ad_set_account, "ad", PAUSE)
    assert created.status_code == 201, created.text

    records = await _records(runtime, await _run(runtime, graph, clients, ws, created.json()["id"]))

    assert set(records) == {"400", "401", "402"}
    assert {r.status for r in records.values()} == {"executed"}
    assert all(r.after == {"status": "PAUSED"} for r in records.values())
    assert {a.effective_status for a in world.accounts["act_2001"].ads.values()} == {"PAUSED"}
    assert {s.effective_status for s in world.accounts["act_2001"].adsets.values()} == {"ACTIVE"}
    assert sorted(cid for cid, _ in world.updates) == ["400", "401", "402"]
