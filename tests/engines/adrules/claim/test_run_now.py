""" "Run now" (issue 18 item 7): one dispatch of an active rule outside its schedule, through the
sweep's path (batch records, one job per account, the stop honoured); the schedule is kept."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.engines.adrules import stops
from app.engines.adrules.models import Batch, Rule
from app.platform.models import Workspace as WorkspaceRow
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    store_token,
)


async def _batches(runtime: Runtime) -> list[Batch]:
    async with runtime.db.read() as session:
        return list((await session.scalars(select(Batch).order_by(Batch.id))).all())


async def _next_run(runtime: Runtime, rule_id: int) -> Any:
    async with runtime.db.read() as session:
        rule = await session.get(Rule, rule_id)
    assert rule is not None
    return rule.next_execution_at


async def test_run_now_dispatches_a_batch_outside_the_schedule(
    client: Any, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    world.add_account("act_1", "Shop")
    world.add_campaigns("act_1", 3)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    rule_id = await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=[account.id],
        schedule={"mode": "timetable", "week": {"sun": ["03:00"]}},
    )
    scheduled = await _next_run(runtime, rule_id)
    assert scheduled > runtime.clock.now()

    ran = await client.post(f"/api/v1/adrules/rules/{rule_id}/run", headers=ws.headers)

    assert ran.status_code == 200, ran.text
    body = ran.json()
    assert (body["jobs"], body["skipped_accounts"], body["stopped"]) == (1, 0, False)
    [batch] = await _batches(runtime)
    assert (batch.batch_id, batch.status, batch.entities) == (body["batch_id"], "queued", 3)
    assert await _next_run(runtime, rule_id) == scheduled  # the schedule is untouched
    # Pressed again in the same second: a second, separate dispatch.
    again = await client.post(f"/api/v1/adrules/rules/{rule_id}/run", headers=ws.headers)
    assert again.json()["batch_id"] != body["batch_id"]
    assert len(await _batches(runtime)) == 2

    # Under a workspace stop the run is recorded as skipped and Meta is not read.
    async with runtime.db.read() as session:
        org = await session.scalar(
            select(WorkspaceRow.organisation_id).where(WorkspaceRow.id == ws.workspace_id)
        )
    async with runtime.db.write() as uow:
        await stops.set_stop(
            uow.session,
            organisation_id=int(org or 0),
            workspace_id=ws.workspace_id,
            reason="",
            stopped_by="tests",
            now=runtime.clock.now(),
        )
    reads = world.count("campaigns.list")
    stopped = (await client.post(f"/api/v1/adrules/rules/{rule_id}/run", headers=ws.headers)).json()
    assert stopped["jobs"] == 0
    assert stopped["skipped_accounts"] == 1
    assert world.count("campaigns.list") == reads
    last = (await _batches(runtime))[-1]
    assert (last.error or "").startswith("platform_stop")


async def test_run_now_refuses_a_rule_that_is_not_active(
    client: Any, runtime: Runtime, ws: Workspace
) -> None:
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    rule_id = await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=[account.id], status="draft"
    )
    refused = await client.post(f"/api/v1/adrules/rules/{rule_id}/run", headers=ws.headers)
    assert refused.status_code == 409
    assert "rule_not_active" in refused.text
    missing = await client.post("/api/v1/adrules/rules/999999/run", headers=ws.headers)
    assert missing.status_code == 404
    assert await _batches(runtime) == []
