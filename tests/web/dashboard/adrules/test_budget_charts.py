"""The rule log's chart data (AR-25): each object's budget before and after every executed change of
a rule, read back from the records — per rule, per run, only the caller's workspace — and the run
history per batch."""

from __future__ import annotations

import html
import json
import re
from decimal import Decimal
from typing import Any

import httpx

from app.engines.adrules import budget_history
from app.engines.adrules.records import get_batch
from app.engines.adrules.schemas import (
    IncreaseBudget,
    LogOnly,
    MetricValueCondition,
    TaskIn,
)
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from app.settings import Settings
from app.web.app import create_app
from app.web.dashboard import adrules_charts
from tests.engines.adrules.factories import Setup, run_rule
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport
from tests.platform.conftest import sign_in

SPEND = MetricValueCondition(metric="spend", period="today", operator="gt", value=Decimal(1))


async def _runs(
    runtime: Runtime, world: GraphWorld, workspace_id: int, task: TaskIn, runs: int
) -> tuple[Setup, list[int]]:
    campaigns = [
        SimCampaign(id="51", name="Alpha", daily_budget=5000),
        SimCampaign(id="52", name="Quiet", daily_budget=5000, delivering=False),
    ]
    return await run_rule(runtime, world, workspace_id, task, campaigns, runs=runs)


def _chart(page: str, element_id: str) -> dict[str, Any] | None:
    found = re.search(rf'id="{element_id}"[^>]*data-chart=\'([^\']*)\'', page)
    return json.loads(html.unescape(found.group(1))) if found else None


async def test_ar25_budgets_per_object_from_the_records_and_the_run_history(
    runtime: Runtime,
    settings: Settings,
    world: GraphWorld,
    tenant: Tenant,
    other_tenant: Tenant,
) -> None:
    task = TaskIn(
        name="Scale",
        conditions=[SPEND],
        action=IncreaseBudget(amount=Decimal(10), max=Decimal(100)),
        cooldown="1h",
    )
    setup, batches = await _runs(runtime, world, tenant.workspace_id, task, runs=2)
    async with runtime.db.read() as session:
        objects = await budget_history.rule_budgets(session, tenant.workspace_id, setup.rule_id)
        theirs = await budget_history.rule_budgets(
            session, other_tenant.workspace_id, setup.rule_id
        )
        batch = (await get_batch(session, tenant.workspace_id, batches[1])).batch
        run_chart = await adrules_charts.batch_budget_chart(session, batch)
    assert [(o.object_id, o.name) for o in objects] == [("51", "Alpha")]  # Quiet never changed
    assert [(p.before, p.after, p.budget) for p in objects[0].points] == [
        (Decimal("50.00"), Decimal("55.00"), "daily_budget"),
        (Decimal("55.00"), Decimal("60.50"), "daily_budget"),
    ]
    assert theirs == []  # another workspace never reads this rule's records
    assert run_chart is not None
    assert [(s["label"], s["values"]) for s in run_chart["series"]] == [
        ("Alpha after", [55.0, 60.5]),
        ("Alpha before", [50.0, 55.0]),
    ]

    app = create_app(settings, runtime, background=False)
    transport = asgi_transport(app)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as mine,
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as other,
    ):
        await sign_in(mine, tenant.email, tenant.password)
        await sign_in(other, other_tenant.email, other_tenant.password)
        log = (await mine.get(f"/ui/adrules/log?rule_id={setup.rule_id}")).text
        run = (await mine.get(f"/ui/adrules/log/{batches[1]}")).text
        foreign = (await other.get(f"/ui/adrules/log?rule_id={setup.rule_id}")).text
    budgets = _chart(log, "budget-chart")
    assert budgets is not None
    assert budgets["series"] == run_chart["series"]
    assert _chart(run, "budget-chart") == budgets
    history = _chart(log, "run-history-chart")
    assert history is not None
    assert [s["values"] for s in history["series"]] == [[1, 1], [0, 0], [0, 0]]
    assert _chart(foreign, "budget-chart") is None
    assert _chart(foreign, "run-history-chart") is None
    assert "No budget change recorded yet." in foreign


async def test_a_rule_that_changes_no_budget_has_no_budget_chart(
    runtime: Runtime, settings: Settings, world: GraphWorld, tenant: Tenant
) -> None:
    task = TaskIn(name="Log", conditions=[SPEND], action=LogOnly())
    setup, batches = await _runs(runtime, world, tenant.workspace_id, task, runs=1)
    app = create_app(settings, runtime, background=False)
    async with httpx.AsyncClient(
        transport=asgi_transport(app), base_url="http://testserver"
    ) as client:
        await sign_in(client, tenant.email, tenant.password)
        log = (await client.get(f"/ui/adrules/log?rule_id={setup.rule_id}")).text
        run = (await client.get(f"/ui/adrules/log/{batches[0]}")).text
    assert _chart(log, "budget-chart") is None
    assert "No budget change recorded yet." in log
    assert _chart(log, "run-history-chart") is not None
    assert 'id="run-budgets"' not in run
