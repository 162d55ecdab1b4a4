"""The demo: a sandbox ad account with a few dozen campaigns, the token stored, a Google Sheet the
rule reads a custom metric from, and a draft rule a person can switch on to watch a dispatch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from app.demo import search_console
from app.demo.adrules import PART, seed_demo
from app.demo.parts import DemoWorkspace
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.models import AdAccount, Rule, Task
from app.engines.adrules.rules import set_status
from app.engines.adrules.work.sheets_values import SHEETS_API_KEY_SECRET
from app.integrations.meta.client import GraphClient
from app.integrations.sheets import ApiKey, SheetsClient
from app.integrations.sheets.client import a1_range
from app.platform.service import get_secret
from app.runtime import Runtime
from app.sandbox.base import ThreadedServer
from app.sandbox.meta.demo import (
    DEMO_SHEET_ID,
    DEMO_SHEET_NAME,
    DEMO_STORE,
    demo_world,
    start_demo_sandbox,
    start_demo_sheets_sandbox,
)
from tests.engines.adrules.factories import create_workspace, dispatch_deps


@pytest.fixture
def demo_sandbox() -> Iterator[ThreadedServer]:
    server = start_demo_sandbox()
    yield server
    server.stop()


async def test_demo_seeds_accounts_token_and_a_draft_rule_that_dispatches_when_activated(
    runtime: Runtime, demo_sandbox: ThreadedServer
) -> None:
    ws = await create_workspace(runtime, name="Demo", timezone="Europe/Berlin")
    demo = DemoWorkspace(
        organisation_id=0,
        workspace_id=ws.workspace_id,
        admin_user_id=0,
        sandbox_urls={"meta": demo_sandbox.url},
    )
    await seed_demo(runtime, demo)

    async with runtime.db.read() as session:
        accounts = list((await session.execute(select(AdAccount).order_by(AdAccount.id))).scalars())
        (rule,) = (await session.execute(select(Rule))).scalars()
    assert [(a.meta_id, a.active) for a in accounts] == [(DEMO_STORE, True), ("act_1000002", False)]
    assert rule.status == "draft"

    async with runtime.db.write() as uow:
        await set_status(
            uow.session,
            workspace_id=ws.workspace_id,
            rule_id=rule.id,
            status="active",
            now=runtime.clock.now(),
        )
    graph = GraphClient(demo_sandbox.url, "v21.0")
    try:
        summary = await dispatch_due(
            dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now
        )
    finally:
        await graph.aclose()
    assert summary.jobs == 1
    assert summary.skipped_accounts == 0


async def test_demo_seeds_a_sheet_the_rule_reads_as_a_custom_metric(runtime: Runtime) -> None:
    """The demo starts the Sheets simulator with the campaign plan, stores its API key for the
    workspace, and the draft rule has a task reading the plan's priority column."""
    assert PART.sandboxes["sheets"] is search_console.start_sheets_sandbox
    meta, sheets = start_demo_sandbox(), start_demo_sheets_sandbox()
    try:
        ws = await create_workspace(runtime, name="Demo", timezone="Europe/Berlin")
        demo = DemoWorkspace(
            organisation_id=0,
            workspace_id=ws.workspace_id,
            admin_user_id=0,
            sandbox_urls={"meta": meta.url, "sheets": sheets.url},
        )
        await seed_demo(runtime, demo)
        async with runtime.db.read() as session:
            key = await get_secret(
                session, runtime.secrets, workspace_id=ws.workspace_id, name=SHEETS_API_KEY_SECRET
            )
            tasks = list((await session.scalars(select(Task).order_by(Task.position))).all())
        assert key is not None
        custom = [
            c for t in tasks for c in t.document["conditions"] if c["type"] == "custom_metric"
        ]
        assert [(c["spreadsheet_id"], c["sheet_name"]) for c in custom] == [
            (DEMO_SHEET_ID, DEMO_SHEET_NAME)
        ]

        # The sheet, read with the stored key, has a numeric priority for every store campaign.
        client = SheetsClient(sheets.url)
        try:
            rows = await client.get_values(
                DEMO_SHEET_ID, a1_range(DEMO_SHEET_NAME, "A:C"), ApiKey(key)
            )
        finally:
            await client.aclose()
    finally:
        meta.stop()
        sheets.stop()
    by_id = {row[0]: row[2] for row in rows[1:]}
    assert set(by_id) == set(demo_world().accounts[DEMO_STORE].campaigns)
    assert {v for v in by_id.values()} == {1, 2, 3}
