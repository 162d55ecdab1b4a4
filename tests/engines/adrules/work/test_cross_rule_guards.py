"""Guards across rules (AR-21): two rules on one campaign cannot undo each other inside the first
one's cooldown, and no object's budget changes more than ADRULES_BUDGET_CHANGES_PER_HOUR (4, Meta's
limit) times in an hour, whichever rules make the changes. Against the Graph API simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from sqlalchemy import select

from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    Condition,
    DecreaseBudget,
    IncreaseBudget,
    MetricValueCondition,
    TaskIn,
)
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    Setup,
    Workspace,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)

ALWAYS: list[Condition] = [
    MetricValueCondition(metric="spend", period="today", operator="gte", value=Decimal("0"))
]
RAISE = TaskIn(
    name="Scale",
    conditions=ALWAYS,
    action=IncreaseBudget(by="percent", amount=Decimal("10"), max=Decimal("1000")),
    cooldown="15m",
)
LOWER = TaskIn(
    name="Trim",
    conditions=ALWAYS,
    action=DecreaseBudget(by="percent", amount=Decimal("10"), min=Decimal("1")),
    cooldown="15m",
)


@pytest.fixture
async def sim(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaigns("act_1001", 1, daily_budget=10_000)
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


async def _run(
    runtime: Runtime, world: GraphWorld, clients: Clients, setup: Setup
) -> ExecutionRecord:
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    await run_account_job(make_deps(runtime, clients), payload)
    async with runtime.db.read() as session:
        (record,) = (
            await session.scalars(
                select(ExecutionRecord).where(ExecutionRecord.batch_id == payload.batch_id)
            )
        ).all()
    return record


async def test_ar21_a_rule_cannot_reverse_another_rules_change_inside_its_cooldown(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    scale = await create_setup(runtime, ws.workspace_id, tasks=[RAISE], rule_name="Scale winners")
    trim = await create_setup(runtime, ws.workspace_id, tasks=[LOWER], rule_name="Trim spend")

    raised = await _run(runtime, world, clients, scale)
    assert raised.status == "executed"
    runtime.clock.advance(120)  # type: ignore[attr-defined]
    refused = await _run(runtime, world, clients, trim)

    assert refused.status == "skipped"
    assert (refused.reason or "").startswith("cross_rule_guard")
    assert "'Scale winners'" in (refused.reason or "")
    assert refused.after == {"daily_budget": "99.00"}  # what it would have written
    assert [fields for _, fields in world.updates] == [{"daily_budget": "11000"}]

    # After the first rule's cooldown, the other rule may act.
    runtime.clock.advance(15 * 60)  # type: ignore[attr-defined]
    assert (await _run(runtime, world, clients, trim)).status == "executed"


async def test_ar21_the_fifth_budget_change_in_an_hour_is_skipped(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    scale = await create_setup(runtime, ws.workspace_id, tasks=[RAISE], rule_name="Scale winners")
    boost = await create_setup(runtime, ws.workspace_id, tasks=[RAISE], rule_name="Boost")

    for run in range(4):  # every 15 minutes, each allowed by the task's own cooldown
        assert (await _run(runtime, world, clients, scale)).status == "executed"
        runtime.clock.advance(15 * 60 if run < 3 else 5 * 60)  # type: ignore[attr-defined]
    # 50 minutes after the first change, another rule raises the same budget.
    fifth = await _run(runtime, world, clients, boost)

    assert fifth.status == "skipped"
    assert "changed 4 times in the last hour" in (fifth.reason or "")
    assert "Scale winners" in (fifth.reason or "")
    assert len(world.updates) == 4
    # An hour after the first change there is room again.
    runtime.clock.advance(11 * 60)  # type: ignore[attr-defined]
    assert (await _run(runtime, world, clients, boost)).status == "executed"
