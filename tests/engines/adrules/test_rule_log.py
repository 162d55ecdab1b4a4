"""The rule log (AR-25), preview (AR-4) and templates (AR-3) over HTTP: batches newest first, a
batch's records with every field, the per-step timeline for workspace admins only, tenancy, bad
input answered 4xx."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.engines.adrules.models import Rule
from app.engines.adrules.schemas import IncreaseBudget, MetricValueCondition, PauseCampaign, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from app.settings import Settings
from app.web.app import create_app
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Workspace,
    create_setup,
    create_workspace,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
    store_token,
)
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport
from tests.harness.clock import manual_clock
from tests.platform.conftest import sign_in


@pytest.fixture
async def new_client(settings: Settings, runtime: Runtime) -> AsyncIterator[Callable[[], Any]]:
    app = create_app(settings, runtime, background=False)
    async with AsyncExitStack() as stack:

        async def make() -> httpx.AsyncClient:
            transport = asgi_transport(app)
            return await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://testserver")
            )

        yield make


async def _two_runs(
    runtime: Runtime, world: GraphWorld, workspace_id: int
) -> tuple[list[int], str]:
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaign("act_1001", SimCampaign(id="21", name="Alpha", daily_budget=5000))
    world.add_campaign(
        "act_1001", SimCampaign(id="22", name="Beta", daily_budget=5000, delivering=False)
    )
    tasks = [
        TaskIn(
            name="Scale",
            conditions=[
                MetricValueCondition(
                    metric="spend", period="today", operator="gt", value=Decimal(1)
                )
            ],
            action=IncreaseBudget(amount=Decimal(10), max=Decimal(100)),
            cooldown="1h",
        )
    ]
    setup = await create_setup(runtime, workspace_id, tasks=tasks, rule_name="Scale rule")
    clients = make_clients(world.base_url)
    ids = []
    try:
        for _ in range(2):
            payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
            await run_account_job(make_deps(runtime, clients), payload)
            ids.append(payload.batch_record_id)
            manual_clock(runtime).advance(minutes=20)
    finally:
        await clients.aclose()
    return ids, payload.batch_id


async def test_ar25_batches_newest_first_with_records_and_every_field(
    runtime: Runtime, world: GraphWorld, ws: Workspace, new_client: Any
) -> None:
    (first, second), _ = await _two_runs(runtime, world, ws.workspace_id)
    client = await new_client()
    listed = (await client.get("/api/v1/adrules/batches", headers=ws.headers)).json()
    assert [b["id"] for b in listed["items"]] == [second, first]

    detail = await client.get(f"/api/v1/adrules/batches/{first}", headers=ws.headers)
    assert detail.status_code == 200
    body = detail.json()
    assert (body["status"], body["executed"], body["not_executed"], body["rule_name"]) == (
        "completed",
        1,
        1,
        "Scale rule",
    )

    records = (
        await client.get(f"/api/v1/adrules/batches/{first}/records", headers=ws.headers)
    ).json()["items"]
    alpha = next(r for r in records if r["campaign_id"] == "21")
    assert alpha["status"] == "executed"
    assert alpha["task_name"] == "Scale"
    assert alpha["parameters"] == {
        "type": "increase_budget",
        "by": "percent",
        "amount": "10",
        "max": "100",
    }
    assert (alpha["before"], alpha["after"]) == (
        {"daily_budget": "50.00"},
        {"daily_budget": "55.00"},
    )
    assert alpha["conditions"][0]["passed"] is True
    assert alpha["steps"]  # an API key acts as a workspace admin
    assert alpha["elapsed_seconds"] >= 0
    assert alpha["next_permitted_at"] is not None
    assert alpha["batch_id"] == body["batch_id"]
    beta = next(r for r in records if r["campaign_id"] == "22")
    assert beta["status"] == "not_executed"
    assert beta["conditions"][0]["seen"] == "0"

    # The second run, 20 minutes later, met the 1-hour cooldown on Alpha.
    skipped = (
        await client.get(
            f"/api/v1/adrules/batches/{second}/records?status=skipped", headers=ws.headers
        )
    ).json()
    assert [r["campaign_id"] for r in skipped["items"]] == ["21"]
    assert "cooldown of 1 hour" in skipped["items"][0]["reason"]

    # Paging.
    page1 = (
        await client.get(f"/api/v1/adrules/batches/{first}/records?limit=1", headers=ws.headers)
    ).json()
    page2 = (
        await client.get(
            f"/api/v1/adrules/batches/{first}/records?limit=1&cursor={page1['next_cursor']}",
            headers=ws.headers,
        )
    ).json()
    assert len(page1["items"]) == len(page2["items"]) == 1
    assert page1["items"][0]["id"] != page2["items"][0]["id"]
    assert page2["next_cursor"] is None

    # Bad input is a 4xx in the project's format.
    for query in ("status=done", "cursor=abc", "limit=0", "limit=201"):
        r = await client.get(f"/api/v1/adrules/batches/{first}/records?{query}", headers=ws.headers)
        assert r.status_code in (400, 422), query
        assert "code" in r.json()

    # Another workspace's batch answers 404.
    other = await create_workspace(runtime, name="Globex")
    for path in (f"/api/v1/adrules/batches/{first}", f"/api/v1/adrules/batches/{first}/records"):
        r = await client.get(path, headers=other.headers)
        assert r.status_code == 404
        assert r.json()["code"] == "not_found"


async def test_ar4_preview_over_http_writes_nothing(
    runtime: Runtime, world: GraphWorld, ws: Workspace, new_client: Any
) -> None:
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaigns("act_1001", 3)
    await store_token(runtime, ws.workspace_id, JOB_TOKEN)
    setup = await create_setup(
        runtime,
        ws.workspace_id,
        tasks=[
            TaskIn(
                conditions=[
                    MetricValueCondition(metric="impressions", operator="gte", value=Decimal(0))
                ],
                action=PauseCampaign(),
            )
        ],
    )
    client = await new_client()
    world.state.reset_counts()
    r = await client.post(
        f"/api/v1/adrules/rules/{setup.rule_id}/preview",
        json={"account_id": setup.account_id},
        headers=ws.headers,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [t["would"] for c in body["campaigns"] for t in c["tasks"]] == ["act"] * 3
    assert world.count("campaign.update") == 0
    assert world.updates == []

    unknown = await client.post(
        f"/api/v1/adrules/rules/{setup.rule_id}/preview",
        json={"account_id": 99999},
        headers=ws.headers,
    )
    assert unknown.status_code == 404
    other = await create_workspace(runtime, name="Other")
    theirs = await client.post(
        f"/api/v1/adrules/rules/{setup.rule_id}/preview",
        json={"account_id": setup.account_id},
        headers=other.headers,
    )
    assert theirs.status_code == 404


async def test_ar3_templates_over_http(runtime: Runtime, ws: Workspace, new_client: Any) -> None:
    client = await new_client()
    listed = (await client.get("/api/v1/adrules/templates", headers=ws.headers)).json()
    assert [t["key"] for t in listed] == [
        "night_budget_reset",
        "pause_losers",
        "scale_winners",
        "stop_loss",
    ]

    r = await client.post(
        "/api/v1/adrules/templates/stop_loss/rules",
        json={"name": "Stop EU", "params": {"cost": "25"}},
        headers=ws.headers,
    )
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "draft"
    rule = (await client.get(f"/api/v1/adrules/rules/{r.json()['id']}", headers=ws.headers)).json()
    assert rule["status"] == "draft"
    assert rule["tasks"][0]["conditions"][0]["value"] == "25"

    async with runtime.db.read() as session:
        before = await session.scalar(select(func.count()).select_from(Rule))
    assert (
        await client.post("/api/v1/adrules/templates/nope/rules", json={}, headers=ws.headers)
    ).status_code == 404
    bad = await client.post(
        "/api/v1/adrules/templates/night_budget_reset/rules",
        json={"params": {"hour": 30}},
        headers=ws.headers,
    )
    assert bad.status_code == 422
    assert "hour" in bad.text
    unknown_field = await client.post(
        "/api/v1/adrules/templates/pause_losers/rules", json={"colour": "red"}, headers=ws.headers
    )
    assert unknown_field.status_code == 422
    async with runtime.db.read() as session:
        assert (
            await session.scalar(select(func.count()).select_from(Rule)) == before
        )  # nothing half-written


async def test_ar25_admin_sees_the_step_timeline_and_a_member_does_not(
    runtime: Runtime, world: GraphWorld, tenant: Tenant, new_client: Any
) -> None:
    (first, _), _ = await _two_runs(runtime, world, tenant.workspace_id)
    admin, member = await new_client(), await new_client()
    await sign_in(admin, tenant.email, tenant.password)
    await sign_in(member, tenant.member_email, tenant.member_password)

    listing = await admin.get("/ui/adrules/log")
    assert listing.status_code == 200
    assert f'href="/ui/adrules/log/{first}"' in listing.text

    as_admin = await admin.get(f"/ui/adrules/log/{first}")
    as_member = await member.get(f"/ui/adrules/log/{first}")
    assert as_admin.status_code == as_member.status_code == 200
    assert 'class="timeline"' in as_admin.text
    assert "insights_read" in as_admin.text
    assert 'class="timeline"' not in as_member.text
    for html in (as_admin.text, as_member.text):
        assert "Alpha" in html
        assert "daily_budget 50.00" in html  # before → after
        assert "s</span>" in html  # total time for everyone
        assert 'data-status="executed"' in html
