"""The demo end to end: its draft rule previews against the sandbox account without a write, is
set live, dispatched, run by the worker, and its records read in the rule log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.demo.adrules import seed_demo
from app.demo.parts import DemoWorkspace
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.models import AdAccount, Rule
from app.engines.adrules.payloads import RunAccountPayload
from app.engines.adrules.rules import set_status
from app.engines.adrules.work.account import run_account_job
from app.engines.adrules.work.preview import preview_rule
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.base import ThreadedServer
from app.sandbox.meta.demo import DEMO_STORE, start_demo_sandbox, start_demo_sheets_sandbox
from app.settings import Settings
from app.web.app import create_app
from tests.engines.adrules.factories import create_workspace, dispatch_deps, make_clients, make_deps
from tests.harness.app_client import asgi_transport


@pytest.fixture
def demo_sandbox() -> Iterator[ThreadedServer]:
    server = start_demo_sandbox()
    yield server
    server.stop()


@pytest.fixture
def demo_sheets() -> Iterator[ThreadedServer]:
    server = start_demo_sheets_sandbox()
    yield server
    server.stop()


class RecordingQueue:
    backend = "memory"

    def __init__(self) -> None:
        self.payloads: list[RunAccountPayload] = []

    async def enqueue(self, uow: Any, spec: Any, payload: Any, **_: Any) -> None:
        async def keep() -> None:
            self.payloads.append(payload)

        uow.after_commit(keep)


async def test_demo_rule_previews_goes_live_and_leaves_records(
    runtime: Runtime, settings: Settings, demo_sandbox: ThreadedServer, demo_sheets: ThreadedServer
) -> None:
    ws = await create_workspace(runtime, name="Demo", timezone="Europe/Berlin")
    await seed_demo(
        runtime,
        DemoWorkspace(
            organisation_id=0,
            workspace_id=ws.workspace_id,
            admin_user_id=0,
            sandbox_urls={"meta": demo_sandbox.url, "sheets": demo_sheets.url},
        ),
    )
    async with runtime.db.read() as session:
        rule = (await session.scalars(select(Rule))).one()
        store = (
            await session.scalars(select(AdAccount).where(AdAccount.meta_id == DEMO_STORE))
        ).one()

    clients = make_clients(demo_sandbox.url, demo_sheets.url)
    graph = GraphClient(demo_sandbox.url, "v21.0")
    try:
        preview = await preview_rule(
            make_deps(runtime, clients),
            workspace_id=ws.workspace_id,
            rule_id=rule.id,
            ad_account_id=store.id,
        )
        # The draft's pre-filters keep the active "Summer sale" campaigns.
        assert preview.campaigns
        assert all(
            c.name.startswith("Summer sale") and c.effective_status == "ACTIVE"
            for c in preview.campaigns
        )
        assert all(len(c.tasks) == 2 for c in preview.campaigns)
        # The second task's custom metric is read from the demo's sheet for every campaign.
        sheet_conditions = [c.tasks[1].conditions[0] for c in preview.campaigns]
        assert all(s.seen is not None and s.reason is None for s in sheet_conditions)
        assert {s.seen for s in sheet_conditions} <= {"1", "2", "3"}

        async with runtime.db.write() as uow:
            await set_status(
                uow.session,
                workspace_id=ws.workspace_id,
                rule_id=rule.id,
                status="active",
                now=runtime.clock.now(),
            )
        queue = RecordingQueue()
        await dispatch_due(
            # The dispatch only enqueues: a queue that records what it is given is all it needs.
            dispatch_deps(runtime, graph=graph, queue=queue),  # type: ignore[arg-type]
            runtime.clock.now(),
            runtime.clock.now,
        )
        (payload,) = queue.payloads
        status = await run_account_job(make_deps(runtime, clients), payload)
    finally:
        await clients.aclose()
        await graph.aclose()
    assert status == "completed"

    app = create_app(settings, runtime, background=False)
    async with httpx.AsyncClient(
        transport=asgi_transport(app), base_url="http://testserver"
    ) as client:
        listed = (await client.get("/api/v1/adrules/batches", headers=ws.headers)).json()["items"]
        assert [b["status"] for b in listed] == ["completed"]
        records = (
            await client.get(
                f"/api/v1/adrules/batches/{listed[0]['id']}/records", headers=ws.headers
            )
        ).json()["items"]
    assert len(records) == 2 * len(preview.campaigns)
    # The run agrees with what the preview said it would do.
    would = {(c.id, t.task_id): t.would for c in preview.campaigns for t in c.tasks}
    assert {
        (r["campaign_id"], r["task_id"]): ("act" if r["status"] == "executed" else "nothing")
        for r in records
    } == would
