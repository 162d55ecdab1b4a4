"""AR-23a the ad account's clock: a Jakarta account in a Berlin workspace runs its timetable and
its clock conditions at Jakarta time, also across the weekend Berlin changes to summer time; an
active rule needs an active account (AR-20)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.models import Rule
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.work.account import run_account_job
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.models import Job
from tests.engines.adrules.factories import (
    TOKEN,
    create_account,
    create_rule,
    create_workspace,
    dispatch_deps,
    make_clients,
    make_deps,
    store_token,
)

NIGHT_TASK: dict[str, Any] = {
    "name": "Night check",
    "conditions": [{"type": "clock", "hours": [23]}],
    "action": {"type": "log_only"},
    "cooldown": "15m",
}


async def _rule(runtime: Runtime, rule_id: int) -> Rule:
    async with runtime.db.read() as session:
        rule = await session.get(Rule, rule_id)
    assert rule is not None
    return rule


async def _take_job(runtime: Runtime) -> RunAccountPayload:
    async with runtime.db.write() as uow:
        (job,) = (
            await uow.session.execute(select(Job).where(Job.name == RUN_ACCOUNT_JOB))
        ).scalars()
        payload = msgspec.json.decode(job.payload, type=RunAccountPayload)
        await uow.session.delete(job)
    return payload


async def test_ar23a_a_jakarta_account_runs_on_jakarta_time_across_berlin_dst(
    runtime: Runtime, world: GraphWorld, graph: GraphClient
) -> None:
    clock = runtime.clock
    assert isinstance(clock, ManualClock)
    # Saturday 2026-03-28 noon UTC; Berlin moves to summer time on Sunday 29 March at 01:00 UTC.
    clock.set(datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
    berlin = await create_workspace(runtime, name="Berlin", timezone="Europe/Berlin")
    world.add_account("act_77", "Toko Jakarta", currency="IDR", timezone_name="Asia/Jakarta")
    world.add_campaigns("act_77", 2, daily_budget=150_000)
    world.grant(TOKEN, "act_77")
    await store_token(runtime, berlin.workspace_id)
    account = await create_account(
        runtime,
        workspace_id=berlin.workspace_id,
        meta_id="act_77",
        currency="IDR",
        timezone_name="Asia/Jakarta",
    )
    every_day = {key: ["23:00"] for key in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
    rule_id = await create_rule(
        runtime,
        workspace_id=berlin.workspace_id,
        account_ids=[account.id],
        schedule={"mode": "timetable", "week": every_day},
        tasks=[NIGHT_TASK],
    )
    clients = make_clients(world.base_url)
    try:
        # 23:00 in Jakarta is 16:00 UTC every day: 17:00 in Berlin before the change, 18:00 after.
        for day in (28, 29, 30):
            due = datetime(2026, 3, day, 16, 0, tzinfo=UTC)
            assert (await _rule(runtime, rule_id)).next_execution_at == due
            clock.set(due)
            deps = dispatch_deps(runtime, graph=graph)
            assert (await dispatch_due(deps, clock.now(), clock.now)).jobs == 1
            payload = await _take_job(runtime)
            assert payload.rule.timezone == "Asia/Jakarta"
            await run_account_job(make_deps(runtime, clients), payload)
            async with runtime.db.read() as session:
                records = list(
                    (
                        await session.scalars(
                            select(ExecutionRecord).where(
                                ExecutionRecord.batch_id == payload.batch_id
                            )
                        )
                    ).all()
                )
            # The clock condition saw 23:00 Jakarta time and passed; the record names the zone.
            assert [r.status for r in records] == ["executed", "executed"]
            assert all("23:00 (Asia/Jakarta)" in r.conditions[0]["seen"] for r in records)
        assert (await _rule(runtime, rule_id)).next_execution_at == datetime(
            2026, 3, 31, 16, 0, tzinfo=UTC
        )
    finally:
        await clients.aclose()


async def test_ar20_activation_is_refused_when_every_account_is_inactive(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    ws = await create_workspace(runtime, name="Idle")
    idle = await create_account(
        runtime, workspace_id=ws.workspace_id, meta_id="act_5", active=False
    )
    body: dict[str, Any] = {
        "name": "Never runs",
        "status": "active",
        "account_ids": [idle.id],
        "tasks": [NIGHT_TASK],
    }
    refused = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
    assert refused.status_code == 422
    assert "inactive" in refused.text
    draft = await client.post(
        "/api/v1/adrules/rules", json={**body, "status": "draft"}, headers=ws.headers
    )
    assert draft.status_code == 201
    rule_id = draft.json()["id"]
    status = await client.post(
        f"/api/v1/adrules/rules/{rule_id}/status", json={"status": "active"}, headers=ws.headers
    )
    assert status.status_code == 422
    assert "inactive" in status.text
    assert (await _rule(runtime, rule_id)).status == "draft"
    # Once the account is activated, the rule may go live.
    activated = await client.post(
        f"/api/v1/adrules/accounts/{idle.id}/activate", headers=ws.headers
    )
    assert activated.status_code == 200
    status = await client.post(
        f"/api/v1/adrules/rules/{rule_id}/status", json={"status": "active"}, headers=ws.headers
    )
    assert status.status_code == 200
    assert timedelta(0) <= (
        datetime.fromisoformat(status.json()["next_execution_at"].replace("Z", "+00:00"))
        - runtime.clock.now()
    )
