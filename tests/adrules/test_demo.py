"""The demo: a sandbox ad account with a few dozen campaigns, the token stored, and a draft rule a
person can switch on to watch a dispatch happen."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from app.engines.adrules.demo import seed_demo
from app.engines.adrules.dispatch import dispatch_due
from app.engines.adrules.models import AdAccount, Rule
from app.engines.adrules.rules import set_status
from app.engines.plugin import DemoWorkspace
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.base import ThreadedServer
from app.sandbox.meta.demo import DEMO_STORE, start_demo_sandbox
from tests.adrules.support import create_workspace, dispatch_deps


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
