"""Shadow rules (issue 18 item 7, AR-1, AR-17, AR-18): a rule in ``shadow`` status runs on its
schedule through the sweep and the worker like an active one, re-reads and plans every action, and
records what it would have done — every condition, each action's before and after — while nothing
is written to Meta. "Run now" dispatches it once outside the schedule. Against the Graph API
simulator over loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.adrules.claim.dispatch import dispatch_due, dispatch_now
from app.engines.adrules.models import Batch, Rule
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

SCALE_AND_PAUSE = [
    {
        "name": "Scale",
        "conditions": [
            {"type": "metric_value", "metric": "spend", "operator": "gte", "value": "0"}
        ],
        "action": {"type": "increase_budget", "by": "percent", "amount": "50", "max": "60"},
        "cooldown": "1h",
    },
    {
        "name": "Pause",
        "conditions": [
            {"type": "metric_value", "metric": "impressions", "operator": "gte", "value": "0"}
        ],
        "action": {"type": "pause_campaign"},
        "cooldown": "1h",
    },
]


@pytest.fixture
async def clients(world: GraphWorld) -> AsyncIterator[Clients]:
    made = make_clients(world.base_url)
    yield made
    await made.aclose()


async def _shadow_rule(client: Any, runtime: Runtime, ws: Workspace, world: GraphWorld) -> int:
    world.add_account("act_1", "Shop", currency="USD", timezone_name="UTC")
    world.add_campaigns("act_1", 3, daily_budget=5000)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    body = {
        "name": "Trust me first",
        "status": "shadow",
        "account_ids": [account.id],
        "schedule": {"mode": "interval", "minutes": 60},
        "tasks": SCALE_AND_PAUSE,
    }
    created = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
    assert created.status_code == 201, created.text
    assert created.json()["status"] == "shadow"
    assert created.json()["next_execution_at"] is not None  # scheduled like an active rule
    return int(created.json()["id"])


async def _run_queued(runtime: Runtime, clients: Clients, done: set[str]) -> list[str]:
    """Run every queued account job not run yet; returns their batch ids."""
    async with runtime.db.read() as session:
        rows = (await session.scalars(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).all()
    ran = []
    for row in rows:
        payload = msgspec.json.decode(row.payload, type=RunAccountPayload)
        if payload.batch_id in done:
            continue
        done.add(payload.batch_id)
        await run_account_job(make_deps(runtime, clients), payload)
        ran.append(payload.batch_id)
    return ran


async def _run_now(runtime: Runtime, graph: GraphClient, ws: Workspace, rule_id: int) -> None:
    summary = await dispatch_now(
        dispatch_deps(runtime, graph=graph),
        workspace_id=ws.workspace_id,
        rule_id=rule_id,
        now=runtime.clock.now(),
    )
    assert summary.jobs == 1


async def _records(runtime: Runtime, batch_id: str) -> list[ExecutionRecord]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord)
            .where(ExecutionRecord.batch_id == batch_id)
            .order_by(ExecutionRecord.campaign_id, ExecutionRecord.task_id)
        )
        return list(rows.all())


async def _batch(runtime: Runtime, batch_id: str) -> Batch:
    async with runtime.db.read() as session:
        batch = await session.scalar(select(Batch).where(Batch.batch_id == batch_id))
    assert batch is not None
    return batch


async def test_a_shadow_rule_runs_on_its_schedule_records_everything_and_writes_nothing(
    client: Any,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    clients: Clients,
    clock: ManualClock,
) -> None:
    rule_id = await _shadow_rule(client, runtime, ws, world)
    budgets = {c.id: c.daily_budget for c in world.accounts["act_1"].campaigns.values()}

    # The sweep takes the shadow rule when it is due, as it takes an active one.
    summary = await dispatch_due(dispatch_deps(runtime, graph=graph), clock.now(), clock.now)
    assert summary.jobs == 1
    done: set[str] = set()
    [batch_id] = await _run_queued(runtime, clients, done)

    records = await _records(runtime, batch_id)
    assert len(records) == 6  # 3 campaigns x 2 tasks
    assert {r.status for r in records} == {"would_execute"}
    scale = [r for r in records if r.action == "increase_budget"]
    pause = [r for r in records if r.action == "pause_campaign"]
    for r in scale:
        # Planned from the live budget (re-read), clamped at the maximum, as a live run would.
        assert r.before == {"daily_budget": "50.00"}
        assert r.after == {"daily_budget": "60.00", "clamped_at": "max", "projected": "75.00"}
        assert [c["passed"] for c in r.conditions] == [True]
        assert r.conditions[0]["seen"] is not None
    for r in pause:
        assert (r.before, r.after) == ({"status": "ACTIVE"}, {"status": "PAUSED"})
        assert r.conditions
        assert r.conditions[0]["passed"] is True
    assert all("nothing was written" in (r.reason or "") for r in records)

    # Nothing reached Meta: no update call at all, budgets and statuses as they were.
    assert world.count("campaign.update") == 0
    assert world.updates == []
    assert {c.id: c.daily_budget for c in world.accounts["act_1"].campaigns.values()} == budgets
    assert {c.effective_status for c in world.accounts["act_1"].campaigns.values()} == {"ACTIVE"}

    batch = await _batch(runtime, batch_id)
    assert batch.shadow is True
    assert (batch.status, batch.executed) == ("completed", 6)
    listed = await client.get(f"/api/v1/adrules/batches?rule_id={rule_id}", headers=ws.headers)
    assert listed.status_code == 200, listed.text
    assert [b["shadow"] for b in listed.json()["items"]] == [True]

    # "Run now": one more batch outside the schedule; the shadow's own cooldown holds there.
    async with runtime.db.read() as session:
        rule = await session.get(Rule, rule_id)
        assert rule is not None
        scheduled = rule.next_execution_at
    assert scheduled is not None
    assert scheduled > clock.now()
    ran = await client.post(f"/api/v1/adrules/rules/{rule_id}/run", headers=ws.headers)
    assert ran.status_code == 200, ran.text
    assert ran.json()["jobs"] == 1
    assert (await _batch(runtime, ran.json()["batch_id"])).shadow is True
    # The same dispatch, its job on the database queue this test runs.
    await _run_now(runtime, graph, ws, rule_id)
    # (On the database queue the API's job is there too: each run is recorded the same way.)
    for second in await _run_queued(runtime, clients, done):
        again = await _records(runtime, second)
        assert len(again) == 6
        assert {r.status for r in again} == {"skipped"}
        assert all("cooldown" in (r.reason or "").lower() for r in again)
    assert world.count("campaign.update") == 0
    async with runtime.db.read() as session:
        rule = await session.get(Rule, rule_id)
        assert rule is not None
        assert rule.next_execution_at == scheduled

    # Promoted to active, the rule acts at once: a shadow run never puts a live one on cooldown.
    clock.advance(60)
    promoted = await client.post(
        f"/api/v1/adrules/rules/{rule_id}/status", json={"status": "active"}, headers=ws.headers
    )
    assert promoted.status_code == 200, promoted.text
    await _run_now(runtime, graph, ws, rule_id)
    [third] = await _run_queued(runtime, clients, done)
    assert {r.status for r in await _records(runtime, third)} == {"executed"}
    assert (await _batch(runtime, third)).shadow is False
    assert {c.daily_budget for c in world.accounts["act_1"].campaigns.values()} == {6000}
    assert {c.effective_status for c in world.accounts["act_1"].campaigns.values()} == {"PAUSED"}


async def test_a_shadow_rule_sends_no_notification_and_says_what_it_would_send(
    client: Any,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    clients: Clients,
) -> None:
    world.add_account("act_1", "Shop", currency="USD", timezone_name="UTC")
    world.add_campaigns("act_1", 1)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    body = {
        "name": "Tell me",
        "status": "shadow",
        "account_ids": [account.id],
        "schedule": {"mode": "interval", "minutes": 60},
        "tasks": [
            {
                "conditions": [
                    {"type": "metric_value", "metric": "spend", "operator": "gte", "value": "0"}
                ],
                "action": {
                    "type": "notify_email",
                    "recipients": ["ops@example.com"],
                    "subject": "{name}",
                },
                "cooldown": "1h",
            }
        ],
    }
    created = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
    assert created.status_code == 201, created.text
    await _run_now(runtime, graph, ws, int(created.json()["id"]))
    # No mail sender at all: a shadow run that tried to send would record an error.
    [batch_id] = await _run_queued(runtime, clients, set())
    [record] = await _records(runtime, batch_id)
    assert record.status == "would_execute"
    # It would have gone into the run's digest to that channel (AR-27); nothing was sent.
    assert record.after == {"would_be_in_digest": "e-mail to ops@example.com"}
