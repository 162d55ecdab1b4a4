"""AR-44 the zone a run used is in every batch (from its dispatch on) and in every record, and the
rule log shows it: a rule over ad accounts in different zones names no zone of its own, and each
account's batch and records carry that account's zone. AR-46 an object-level reason names the
object's level: "the ad is already PAUSED", never "the campaign". Through the API, the dispatcher
and the worker against the Graph API simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.claim.dispatch import dispatch_now
from app.engines.adrules.models import Batch
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.work.account import run_account_job
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.models import Job
from app.settings import Settings
from app.web.app import create_app
from tests.conftest import auth
from tests.engines.adrules.factories import (
    TOKEN,
    create_account,
    dispatch_deps,
    make_clients,
    make_deps,
    rule_body,
    store_token,
)
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport
from tests.platform.conftest import post_form, sign_in

SPENT = [{"type": "metric_value", "metric": "spend", "operator": "gte", "value": "0"}]
PAUSE = {"name": "Stop", "conditions": SPENT, "action": {"type": "pause_campaign"}}


@pytest.fixture
async def new_client(settings: Settings, runtime: Runtime) -> AsyncIterator[Callable[[], Any]]:
    app = create_app(settings, runtime, background=False)
    async with AsyncExitStack() as stack:

        async def make() -> httpx.AsyncClient:
            return await stack.enter_async_context(
                httpx.AsyncClient(transport=asgi_transport(app), base_url="http://t")
            )

        yield make


async def _dispatch_and_run(
    runtime: Runtime, graph: GraphClient, world: GraphWorld, workspace_id: int, rule_id: int
) -> list[RunAccountPayload]:
    summary = await dispatch_now(
        dispatch_deps(runtime, graph=graph),
        workspace_id=workspace_id,
        rule_id=rule_id,
        now=runtime.clock.now(),
    )
    async with runtime.db.read() as session:
        rows = (await session.scalars(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).all()
    payloads = [msgspec.json.decode(r.payload, type=RunAccountPayload) for r in rows]
    mine = [p for p in payloads if p.batch_id == summary.batch_ids[0]]
    clients = make_clients(world.base_url)
    try:
        for payload in mine:
            await run_account_job(make_deps(runtime, clients), payload)
    finally:
        await clients.aclose()
    return mine


async def test_ar44_each_accounts_zone_is_in_its_batch_and_records_and_shown(
    runtime: Runtime,
    world: GraphWorld,
    graph: GraphClient,
    tenant: Tenant,
    client: httpx.AsyncClient,
    new_client: Any,
) -> None:
    ids = {}
    for meta_id, zone in (("act_7001", "Asia/Jakarta"), ("act_7002", "America/New_York")):
        world.add_account(meta_id, meta_id, timezone_name=zone)
        world.add_campaigns(meta_id, 2)
        world.grant(TOKEN, meta_id)
        account = await create_account(
            runtime, workspace_id=tenant.workspace_id, meta_id=meta_id, timezone_name=zone
        )
        ids[meta_id] = account.id
    await store_token(runtime, tenant.workspace_id)
    created = await client.post(
        "/api/v1/adrules/rules",
        json={
            "name": "Two zones",
            "status": "active",
            "account_ids": list(ids.values()),
            "tasks": [{**PAUSE, "action": {"type": "log_only"}}],
        },
        headers=auth(tenant),
    )
    assert created.status_code == 201, created.text
    # Accounts in different zones: the rule names none; each run takes its account's.
    assert created.json()["schedule"]["timezone"] is None

    payloads = await _dispatch_and_run(
        runtime, graph, world, tenant.workspace_id, created.json()["id"]
    )

    assert len(payloads) == 2
    async with runtime.db.read() as session:
        batches = {b.account_meta_id: b for b in (await session.scalars(select(Batch))).all()}
        records = (await session.scalars(select(ExecutionRecord))).all()
    assert {m: b.timezone for m, b in batches.items()} == {
        "act_7001": "Asia/Jakarta",
        "act_7002": "America/New_York",
    }
    by_account = {ids["act_7001"]: "Asia/Jakarta", ids["act_7002"]: "America/New_York"}
    assert len(records) == 4
    assert all(r.timezone == by_account[r.ad_account_id] for r in records)
    assert {r.attribution for r in records} == {"unified"}

    jakarta = batches["act_7001"]
    listed = (await client.get("/api/v1/adrules/batches", headers=auth(tenant))).json()["items"]
    assert {b["account_meta_id"]: b["timezone"] for b in listed} == {
        "act_7001": "Asia/Jakarta",
        "act_7002": "America/New_York",
    }
    detail = await client.get(f"/api/v1/adrules/batches/{jakarta.id}", headers=auth(tenant))
    assert detail.json()["timezone"] == "Asia/Jakarta"
    shown = await client.get(f"/api/v1/adrules/batches/{jakarta.id}/records", headers=auth(tenant))
    assert {(r["timezone"], r["attribution"]) for r in shown.json()["items"]} == {
        ("Asia/Jakarta", "unified")
    }
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)
    listing = await browser.get("/ui/adrules/log")
    assert '<td class="zone">Asia/Jakarta</td>' in listing.text
    assert '<td class="zone">America/New_York</td>' in listing.text
    page = await browser.get(f"/ui/adrules/log/{jakarta.id}")
    assert page.status_code == 200
    assert '<span id="batch-zone">Asia/Jakarta</span>' in page.text
    assert "zone Asia/Jakarta" in page.text
    assert "attribution: each ad set’s own setting" in page.text


@pytest.mark.parametrize(
    ("level", "edge", "noun"), [("ad", "ads", "ad"), ("adset", "adsets", "ad set")]
)
async def test_ar46_the_reason_names_the_object_of_the_rules_level(
    runtime: Runtime,
    world: GraphWorld,
    graph: GraphClient,
    tenant: Tenant,
    client: httpx.AsyncClient,
    level: str,
    edge: str,
    noun: str,
) -> None:
    world.add_account("act_8001", "Shop", timezone_name="UTC")
    [campaign] = world.add_campaigns("act_8001", 1, daily_budget=None)
    world.add_child("act_8001", edge, "901", campaign_id=campaign.id, effective_status="PAUSED")
    world.add_child("act_8001", edge, "902", campaign_id=campaign.id)
    world.grant(TOKEN, "act_8001")
    account = await create_account(runtime, workspace_id=tenant.workspace_id, meta_id="act_8001")
    await store_token(runtime, tenant.workspace_id)
    created = await client.post(
        "/api/v1/adrules/rules",
        json={
            "name": "Pause",
            "status": "active",
            "level": level,
            "account_ids": [account.id],
            "tasks": [PAUSE],
        },
        headers=auth(tenant),
    )
    assert created.status_code == 201, created.text

    await _dispatch_and_run(runtime, graph, world, tenant.workspace_id, created.json()["id"])

    async with runtime.db.read() as session:
        records = {r.campaign_id: r for r in (await session.scalars(select(ExecutionRecord)))}
    assert records["901"].status == "not_executed"
    assert records["901"].reason == f"the {noun} is already PAUSED"
    assert "campaign" not in (records["901"].reason or "")
    assert records["902"].status == "executed"


async def test_ar41_ar44_the_rule_editor_sets_the_zone_and_the_attribution_windows(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, new_client: Any
) -> None:
    account = await create_account(runtime, workspace_id=tenant.workspace_id, meta_id="act_9001")
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)
    form = {
        "name": "Edited in the dashboard",
        "status": "draft",
        "level": "campaign",
        "account_ids": str(account.id),
        "mode": "interval",
        "minutes": "60",
        "timezone": "Asia/Jakarta",
        "attribution_click": "7d_click",
        "attribution_views": ["1d_view", "1d_ev"],
        "tasks_json": '[{"conditions": [{"type": "metric_value", "metric": "spend", '
        '"operator": "gt", "value": "1"}], "action": {"type": "log_only"}}]',
    }
    saved = await post_form(browser, "/ui/adrules/rules/new", "/ui/adrules/rules", **form)
    assert saved.status_code in (302, 303), saved.text
    rules = (await client.get("/api/v1/adrules/rules", headers=auth(tenant))).json()["items"]
    [rule] = [r for r in rules if r["name"] == "Edited in the dashboard"]
    assert rule["schedule"]["timezone"] == "Asia/Jakarta"
    assert rule["attribution_windows"] == ["7d_click", "1d_view", "1d_ev"]
    page = await browser.get(f"/ui/adrules/rules/{rule['id']}")
    assert 'value="Asia/Jakarta"' in page.text
    assert '<option value="7d_click" selected>' in page.text
    assert 'value="1d_ev" checked' in page.text

    refused = await post_form(
        browser,
        "/ui/adrules/rules/new",
        "/ui/adrules/rules",
        **{**form, "timezone": "Mars/Base", "attribution_click": "", "attribution_views": []},
    )
    assert refused.status_code == 422
    assert "unknown time zone" in refused.text


async def test_ar45_a_new_workspace_zone_moves_the_rules_that_follow_it(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    accounts = [
        (
            await create_account(
                runtime, workspace_id=tenant.workspace_id, meta_id=m, timezone_name=z
            )
        ).id
        for m, z in (("act_7101", "Asia/Jakarta"), ("act_7102", "America/New_York"))
    ]
    daily = {d: ["09:00"] for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
    follows = await client.post(
        "/api/v1/adrules/rules",
        json=rule_body(
            name="Follows the workspace",
            account_ids=accounts,
            schedule={"mode": "timetable", "week": daily},
        ),
        headers=auth(tenant),
    )
    own = await client.post(
        "/api/v1/adrules/rules",
        json=rule_body(
            name="Own zone",
            account_ids=accounts,
            schedule={"mode": "timetable", "week": daily, "timezone": "Europe/Paris"},
        ),
        headers=auth(tenant),
    )
    assert follows.status_code == own.status_code == 201, follows.text
    assert follows.json()["schedule"]["timezone"] is None
    before_own = own.json()["next_execution_at"]
    first = datetime.fromisoformat(follows.json()["next_execution_at"])
    assert (first.astimezone(UTC).hour, first.minute) == (9, 0)  # the workspace's UTC

    r = await client.patch(
        "/api/v1/workspace", json={"timezone": "Asia/Jakarta"}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text

    moved = (
        await client.get(f"/api/v1/adrules/rules/{follows.json()['id']}", headers=auth(tenant))
    ).json()
    at = datetime.fromisoformat(moved["next_execution_at"])
    assert (at.astimezone(ZoneInfo("Asia/Jakarta")).hour, at.minute) == (9, 0)
    kept = (
        await client.get(f"/api/v1/adrules/rules/{own.json()['id']}", headers=auth(tenant))
    ).json()
    assert kept["next_execution_at"] == before_own
