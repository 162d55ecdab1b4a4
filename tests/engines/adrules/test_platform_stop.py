"""AR-23 the platform stop holds on every path: the environment flag and the runtime switches (an
organisation, a workspace) stop queued and deferred account runs, are checked immediately before
every write, and stop the sweep; what was not touched is recorded as skipped (``platform_stop``).
Against the Graph API simulator over loopback."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from litestar.exceptions import PermissionDeniedException
from sqlalchemy import select

from app.engines.adrules import stops
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import Batch
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import MetricValueCondition, PauseCampaign, TaskIn
from app.engines.adrules.stops import StopCheck
from app.engines.adrules.work.account import run_account_job
from app.integrations.meta.client import GraphClient
from app.platform.models import Workspace as WorkspaceRow
from app.platform.service import Principal
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.web.api import adrules_stop as stop_api
from app.web.api.adrules_stop import StopIn
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    TOKEN,
    Clients,
    Workspace,
    create_account,
    create_rule,
    create_setup,
    dispatch_deps,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
    store_token,
)
from tests.harness.sleep import RecordingSleep

PAUSE_ALL = TaskIn(
    name="Pause everything that spent",
    conditions=[
        MetricValueCondition(metric="spend", period="today", operator="gte", value=Decimal("0"))
    ],
    action=PauseCampaign(),
    cooldown="15m",
)


@pytest.fixture
async def sim(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


class Flag:
    def __init__(self) -> None:
        self.on = False

    def __call__(self) -> bool:
        return self.on


class Deferrals:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any]] = []

    async def __call__(self, uow: Any, payload: Any, at: Any) -> None:
        self.calls.append((payload, at))


def _deps(runtime: Runtime, clients: Clients, environment: Any, **changes: Any) -> AdRulesDeps:
    return dataclasses.replace(
        make_deps(runtime, clients),
        sleep=RecordingSleep(),
        stop=StopCheck(runtime.db, environment),
        **changes,
    )


async def _records(runtime: Runtime, batch_id: str) -> list[ExecutionRecord]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord).where(ExecutionRecord.batch_id == batch_id)
        )
        return list(rows.all())


async def _organisation(runtime: Runtime, workspace_id: int) -> int:
    async with runtime.db.read() as session:
        org = await session.scalar(
            select(WorkspaceRow.organisation_id).where(WorkspaceRow.id == workspace_id)
        )
    assert org is not None
    return int(org)


async def test_ar23_a_queued_run_under_the_environment_stop_writes_nothing(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 5)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[PAUSE_ALL])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    flag = Flag()
    flag.on = True  # PLATFORM_STOP set after the job was queued

    assert await run_account_job(_deps(runtime, clients, flag), payload) == "completed"

    assert world.updates == []
    assert world.count("batch") == 0  # not even a read: the run stopped at its start
    records = await _records(runtime, payload.batch_id)
    assert len(records) == 5
    assert {r.status for r in records} == {"skipped"}
    assert all((r.reason or "").startswith("platform_stop") for r in records)


async def test_ar23_a_deferred_run_resumed_under_an_organisation_stop_writes_nothing(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 4)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[PAUSE_ALL])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    world.throttle("batch", minutes=10, times=-1)
    deferrals = Deferrals()
    deps = _deps(runtime, clients, Flag(), defer=deferrals)
    assert await run_account_job(deps, payload) == "queued"
    ((again, at),) = deferrals.calls

    # While it waits, an admin stops the whole organisation at runtime.
    async with runtime.db.write() as uow:
        await stops.set_stop(
            uow.session,
            organisation_id=await _organisation(runtime, ws.workspace_id),
            workspace_id=None,
            reason="Meta incident",
            stopped_by="ops@example.com",
            now=runtime.clock.now(),
        )
    world.state.clear_faults()
    runtime.clock.set(at)  # type: ignore[attr-defined]

    assert await run_account_job(deps, again) == "completed"

    assert world.updates == []
    records = await _records(runtime, payload.batch_id)
    assert [r.status for r in records] == ["skipped"] * 4
    assert all("platform_stop" in (r.reason or "") for r in records)
    assert all("organisation stop" in (r.reason or "") for r in records)
    assert all("Meta incident" in (r.reason or "") for r in records)


async def test_ar23_the_stop_is_checked_immediately_before_every_write(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 6)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[PAUSE_ALL])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    # The stop goes on during the run, once two campaigns have been paused; it is asked
    # immediately before each write call (here two campaigns per batched write).
    deps = _deps(
        runtime, clients, lambda: len(world.updates) >= 2, concurrency=1, write_batch_size=2
    )

    await run_account_job(deps, payload)

    assert len(world.updates) == 2
    records = await _records(runtime, payload.batch_id)
    assert sorted(r.status for r in records) == ["executed"] * 2 + ["skipped"] * 4
    skipped = [r for r in records if r.status == "skipped"]
    assert all((r.reason or "").startswith("platform_stop") for r in skipped)
    # The skipped records still show what was evaluated.
    assert all(r.conditions and r.conditions[0]["passed"] for r in skipped)


async def test_ar23_a_workspace_stop_skips_its_rules_at_the_sweep(
    runtime: Runtime, ws: Workspace, other_ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    account_ids = {}
    for workspace, meta_id in ((ws, "act_1"), (other_ws, "act_2")):
        world.add_account(meta_id, meta_id)
        world.add_campaigns(meta_id, 2)
        world.grant(TOKEN, meta_id)
        account = await create_account(
            runtime, workspace_id=workspace.workspace_id, meta_id=meta_id
        )
        await store_token(runtime, workspace.workspace_id)
        account_ids[meta_id] = account.id
        await create_rule(runtime, workspace_id=workspace.workspace_id, account_ids=[account.id])
    async with runtime.db.write() as uow:
        await stops.set_stop(
            uow.session,
            organisation_id=await _organisation(runtime, ws.workspace_id),
            workspace_id=ws.workspace_id,
            reason="",
            stopped_by="admin@acme.test",
            now=runtime.clock.now(),
        )

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now
    )

    assert (summary.rules, summary.jobs) == (2, 1)
    async with runtime.db.read() as session:
        batches = {b.account_meta_id: b for b in (await session.scalars(select(Batch))).all()}
    assert batches["act_1"].status == "skipped"
    assert (batches["act_1"].error or "").startswith("platform_stop: the workspace stop")
    assert batches["act_2"].status == "queued"
    # The stopped workspace's account was not even read.
    assert [d["scope"] for k, d in world.state.log if k == "campaigns.list"] == ["act_2"]

    # Cleared, the next sweep dispatches it again.
    async with runtime.db.write() as uow:
        assert await stops.clear_stop(
            uow.session,
            organisation_id=await _organisation(runtime, ws.workspace_id),
            workspace_id=ws.workspace_id,
            now=runtime.clock.now(),
        )
    async with runtime.db.read() as session:
        state = await stops.stop_state(session, ws.workspace_id, environment=False)
    assert not state.stopped


async def test_ar23_the_runtime_switch_over_the_api(
    client: Any, ws: Workspace, other_ws: Workspace
) -> None:
    url = "/api/v1/adrules/stop"
    assert (await client.get(url, headers=ws.headers)).json()["stopped"] is False

    on = await client.post(
        url, json={"scope": "workspace", "stopped": True, "reason": "audit"}, headers=ws.headers
    )
    assert on.status_code == 200, on.text
    body = on.json()
    assert body["stopped"] is True
    assert body["environment"] is False
    assert body["workspace"]["reason"] == "audit"
    assert body["reason"].startswith("platform_stop: the workspace stop")
    # Another tenant is not stopped by it.
    assert (await client.get(url, headers=other_ws.headers)).json()["stopped"] is False

    # The organisation's switch freezes every workspace in it: a workspace key cannot set it.
    org = await client.post(
        url, json={"scope": "organisation", "stopped": True}, headers=ws.headers
    )
    assert org.status_code == 403, org.text
    assert "organisation owner or admin" in org.text
    off = await client.post(url, json={"scope": "workspace", "stopped": False}, headers=ws.headers)
    assert off.status_code == 200
    assert (await client.get(url, headers=ws.headers)).json()["stopped"] is False

    bad = await client.post(url, json={"scope": "galaxy", "stopped": True}, headers=ws.headers)
    assert bad.status_code == 422
    assert "scope" in bad.text


async def test_ar23_the_organisation_switch_is_for_organisation_owners_and_admins(
    runtime: Runtime, ws: Workspace
) -> None:
    """The runtime switch of the whole organisation takes an organisation owner or admin; a
    workspace's switch takes an admin of that workspace."""
    organisation_id = await _organisation(runtime, ws.workspace_id)
    base = Principal(workspace_id=ws.workspace_id, organisation_id=organisation_id, role="admin")
    workspace_admin = dataclasses.replace(base, user_id=1, org_role="member")
    member = dataclasses.replace(base, role="member", user_id=2, org_role="member")
    owner = dataclasses.replace(base, role="member", user_id=3, org_role="owner")
    org_admin = dataclasses.replace(base, role="member", user_id=4, org_role="admin")
    on = StopIn(scope="organisation", stopped=True, reason="Meta incident")
    workspace_on = StopIn(scope="workspace", stopped=True)

    with pytest.raises(PermissionDeniedException):
        await stop_api.change_stop(runtime, workspace_admin, on)
    with pytest.raises(PermissionDeniedException):
        await stop_api.change_stop(runtime, member, workspace_on)
    with pytest.raises(PermissionDeniedException):
        await stop_api.change_stop(runtime, owner, workspace_on)

    state = await stop_api.change_stop(runtime, owner, on)
    assert state.organisation is not None
    assert state.stopped
    state = await stop_api.change_stop(
        runtime, org_admin, StopIn(scope="organisation", stopped=False)
    )
    assert state.organisation is None
    state = await stop_api.change_stop(runtime, workspace_admin, workspace_on)
    assert state.workspace is not None
