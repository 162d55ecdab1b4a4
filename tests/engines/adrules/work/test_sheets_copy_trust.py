"""Custom metrics you can trust (AR-15, issue 18 item 8): the database copy of a sheet is refreshed
by every live read the worker makes — also when a preview filled the cache — and the record says
when that copy was used and how old it was; a copy older than the limit is refused, and a sheet
read neither live nor from a usable copy is an ``error`` record. Against the Sheets and Graph API
simulators on loopback ports, on the ManualClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.adrules.run_models import ExecutionRecord, SheetCopy
from app.engines.adrules.schemas import CustomMetricCondition, LogOnly, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.engines.adrules.work.preview import preview_rule
from app.engines.adrules.work.sheets_values import SHEETS_API_KEY_SECRET, SheetCache
from app.platform import service
from app.runtime import Runtime
from app.sandbox.base import simulator_in_loop
from app.sandbox.meta import GraphWorld
from app.sandbox.sheets import SheetsSandbox
from app.settings import AdRulesSettings, Settings
from app.settings_fields import SettingsError
from app.web.app import create_app
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    Setup,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
    store_token,
)
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport
from tests.platform.conftest import sign_in

SHEET_ID = "1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74"


@pytest.fixture
async def sheets() -> AsyncIterator[tuple[SheetsSandbox, str]]:
    sandbox = SheetsSandbox()
    sandbox.put_sheet(
        SHEET_ID,
        "Targets",
        [["campaign_id", "min_roas"], ["100001", "2.5"], ["100002", "1.5"]],
    )
    async with simulator_in_loop(sandbox) as url:
        yield sandbox, url


async def _rule(runtime: Runtime, workspace_id: int, world: GraphWorld) -> Setup:
    """Two campaigns, a Sheets API key and a rule comparing each campaign's sheet value with 2."""
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaigns("act_1001", 2, first_id=100000)  # ids 100001, 100002
    await store_token(runtime, workspace_id, JOB_TOKEN)
    async with runtime.db.write() as uow:
        await service.set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=workspace_id,
            name=SHEETS_API_KEY_SECRET,
            value="sandbox-sheets-key",
            now=runtime.clock.now(),
        )
    cond = CustomMetricCondition(
        spreadsheet_id=SHEET_ID,
        sheet_name="Targets",
        lookup_column="A",
        value_column="B",
        operator="gte",
        value=Decimal(2),
    )
    return await create_setup(
        runtime, workspace_id, tasks=[TaskIn(conditions=[cond], action=LogOnly())]
    )


async def _preview(runtime: Runtime, setup: Setup, clients: Clients, cache: SheetCache) -> Any:
    deps = make_deps(runtime, clients, cache=cache)
    return await preview_rule(
        deps,
        workspace_id=setup.workspace_id,
        rule_id=setup.rule_id,
        ad_account_id=setup.account_id,
    )


async def _run(
    runtime: Runtime,
    setup: Setup,
    world: GraphWorld,
    clients: Clients,
    cache: SheetCache,
    **deps: Any,
) -> tuple[int, dict[str, ExecutionRecord]]:
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    await run_account_job(replace(make_deps(runtime, clients, cache=cache), **deps), payload)
    async with runtime.db.read() as session:
        rows = (
            await session.scalars(
                select(ExecutionRecord).where(ExecutionRecord.batch_id == payload.batch_id)
            )
        ).all()
    return payload.batch_record_id, {r.campaign_id: r for r in rows}


async def _copy(runtime: Runtime) -> SheetCopy | None:
    async with runtime.db.read() as session:
        return await session.scalar(select(SheetCopy))


async def test_ar15_preview_then_live_read_refreshes_the_copy(
    runtime: Runtime,
    clock: ManualClock,
    tenant: Tenant,
    world: GraphWorld,
    sheets: tuple[SheetsSandbox, str],
) -> None:
    sandbox, url = sheets
    setup = await _rule(runtime, tenant.workspace_id, world)
    cache = SheetCache()
    clients = make_clients(world.base_url, url)
    try:
        previewed_at = clock.now()
        preview = await _preview(runtime, setup, clients, cache)
        assert preview.campaigns[0].tasks[0].conditions[0].source == "live"
        assert await _copy(runtime) is None  # a preview saves nothing
        clock.advance(60)
        _, records = await _run(runtime, setup, world, clients, cache)
    finally:
        await clients.aclose()
    # The worker read the rows the preview cached (no second fetch) and saved them as the copy.
    assert sandbox.state.count("values.get") == 1
    copy = await _copy(runtime)
    assert copy is not None
    assert copy.fetched_at == previewed_at
    assert copy.rows[1] == ["100001", "2.5"]
    cond = records["100001"].conditions[0]
    assert (cond["source"], cond["source_age_seconds"]) == ("cache", 60)


async def test_ar15_live_read_failure_after_a_preview_uses_the_copy_and_the_record_says_its_age(
    runtime: Runtime,
    clock: ManualClock,
    settings: Settings,
    tenant: Tenant,
    world: GraphWorld,
    sheets: tuple[SheetsSandbox, str],
) -> None:
    sandbox, url = sheets
    setup = await _rule(runtime, tenant.workspace_id, world)
    cache = SheetCache()
    clients = make_clients(world.base_url, url)
    try:
        await _preview(runtime, setup, clients, cache)
        clock.advance(60)
        await _run(runtime, setup, world, clients, cache)  # served from the preview's cache
        # The Sheets API goes down and the worker restarts (an empty cache); two hours later (past
        # the task's 1-hour cooldown) the rule runs again.
        sandbox.state.inject("values.get", status=503, times=-1)
        clock.advance(hours=2)
        batch, records = await _run(runtime, setup, world, clients, SheetCache())
    finally:
        await clients.aclose()
    assert records["100001"].status == "executed"  # 2.5 >= 2, read from the copy
    assert records["100002"].status == "not_executed"  # 1.5
    for record in records.values():
        cond = record.conditions[0]
        assert cond["source"] == "copy"
        assert cond["source_age_seconds"] == 2 * 3600 + 60  # read by the preview back then
        assert cond["source_note"].startswith("live read failed: ")
        assert cond["sheet_failed"] is False

    app = create_app(settings, runtime, background=False)
    async with httpx.AsyncClient(
        transport=asgi_transport(app), base_url="http://testserver"
    ) as client:
        api = await client.get(
            f"/api/v1/adrules/batches/{batch}/records",
            headers={"Authorization": f"Bearer {tenant.api_key}"},
        )
        assert api.status_code == 200
        seen = {r["campaign_id"]: r["conditions"][0] for r in api.json()["items"]}
        assert seen["100001"]["source"] == "copy"
        assert seen["100001"]["source_age_seconds"] == 2 * 3600 + 60
        assert "live read failed" in seen["100001"]["source_note"]
        await sign_in(client, tenant.email, tenant.password)
        page = await client.get(f"/ui/adrules/log/{batch}")
    assert page.status_code == 200
    assert 'data-source="copy"' in page.text
    assert "from the database copy of the sheet, 2 h 1 min old (live read failed:" in page.text


async def test_ar15_a_copy_older_than_the_limit_is_refused_and_the_record_is_an_error(
    runtime: Runtime,
    clock: ManualClock,
    settings: Settings,
    tenant: Tenant,
    world: GraphWorld,
    sheets: tuple[SheetsSandbox, str],
) -> None:
    sandbox, url = sheets
    setup = await _rule(runtime, tenant.workspace_id, world)
    clients = make_clients(world.base_url, url)
    limit = timedelta(hours=2)
    try:
        await _run(runtime, setup, world, clients, SheetCache(), sheet_copy_max_age=limit)
        sandbox.state.inject("values.get", status=503, times=-1)
        clock.advance(hours=2)  # exactly at the limit: still used
        _, at_limit = await _run(
            runtime, setup, world, clients, SheetCache(), sheet_copy_max_age=limit
        )
        clock.advance(minutes=1)
        batch, records = await _run(
            runtime, setup, world, clients, SheetCache(), sheet_copy_max_age=limit
        )
    finally:
        await clients.aclose()
    assert at_limit["100001"].status == "executed"
    assert at_limit["100001"].conditions[0]["source_age_seconds"] == 2 * 3600
    for record in records.values():
        assert record.status == "error"
        assert record.reason is not None
        assert record.reason.startswith("custom metric sheet unavailable: ")
        assert "its saved copy is 2 h 1 min old, older than the limit of 2 h" in record.reason
        assert record.conditions[0]["sheet_failed"] is True
        assert record.conditions[0]["source"] is None

    app = create_app(settings, runtime, background=False)
    async with httpx.AsyncClient(
        transport=asgi_transport(app), base_url="http://testserver"
    ) as client:
        detail = await client.get(
            f"/api/v1/adrules/batches/{batch}",
            headers={"Authorization": f"Bearer {tenant.api_key}"},
        )
        assert (detail.json()["errors"], detail.json()["status"]) == (2, "failed")
        await sign_in(client, tenant.email, tenant.password)
        page = await client.get(f"/ui/adrules/log/{batch}")
    assert page.text.count('<span class="badge error">error</span>') == 2
    assert "older than the limit of 2 h" in page.text


async def test_ar15_an_unreachable_sheet_without_a_copy_is_an_error_record(
    runtime: Runtime, tenant: Tenant, world: GraphWorld, sheets: tuple[SheetsSandbox, str]
) -> None:
    sandbox, url = sheets
    setup = await _rule(runtime, tenant.workspace_id, world)
    sandbox.state.inject("values.get", status=404, times=-1)
    clients = make_clients(world.base_url, url)
    try:
        _, records = await _run(runtime, setup, world, clients, SheetCache())
    finally:
        await clients.aclose()
    assert {r.status for r in records.values()} == {"error"}
    assert all("no saved copy exists" in (r.reason or "") for r in records.values())


def test_the_copy_age_limit_is_a_setting_of_at_least_a_minute() -> None:
    assert AdRulesSettings().sheet_copy_max_age_minutes == 24 * 60
    with pytest.raises(SettingsError, match="ADRULES_SHEET_COPY_MAX_AGE_MINUTES"):
        AdRulesSettings(sheet_copy_max_age_minutes=0)
