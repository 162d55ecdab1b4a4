"""Templates (AR-3): the four shipped templates build valid rules, a rule created from one is a
draft that is never dispatched, and Night Budget Reset works end to end across a night on a
ManualClock against the Graph API simulator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.adrules import rules as rule_service
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.models import Rule
from app.engines.adrules.payloads import RunAccountPayload
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import ClockCondition, IncreaseBudget, SetBudget
from app.engines.adrules.templates import (
    TEMPLATES,
    FromTemplateIn,
    TemplateParams,
    create_from_template,
)
from app.engines.adrules.validation import check_rule
from app.engines.adrules.work.account import run_account_job
from app.integrations.http_guard import shared_guard
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    create_account,
    create_workspace,
    dispatch_deps,
    make_clients,
    make_deps,
    store_token,
)


def test_the_four_templates_are_shipped() -> None:
    assert {t.title for t in TEMPLATES.values()} == {
        "Night Budget Reset",
        "Pause losers",
        "Scale winners",
        "Stop-loss",
    }


@pytest.mark.parametrize("key", sorted(TEMPLATES))
def test_ar3_every_template_builds_a_valid_draft(key: str) -> None:
    rule = TEMPLATES[key].rule(FromTemplateIn(account_ids=[1]))
    check_rule(rule)  # raises on any validation problem
    assert rule.status == "draft"
    assert rule.tasks


def test_template_numbers_can_be_overridden() -> None:
    rule = TEMPLATES["scale_winners"].rule(
        FromTemplateIn(
            name="Scale EU", params=TemplateParams(percent=Decimal(15), max_budget=Decimal(300))
        )
    )
    action = rule.tasks[0].action
    assert isinstance(action, IncreaseBudget)
    assert (action.amount, action.max) == (Decimal(15), Decimal(300))
    assert rule.name == "Scale EU"
    night = TEMPLATES["night_budget_reset"].rule(
        FromTemplateIn(params=TemplateParams(hour=2, weekdays=["fri", "sat"], amount=Decimal(5)))
    )
    (cond,) = night.tasks[0].conditions
    assert isinstance(cond, ClockCondition)
    assert (cond.hours, cond.weekdays) == ([2], ["fri", "sat"])
    assert isinstance(night.tasks[0].action, SetBudget)


class RecordingQueue:
    """Keeps the payloads a dispatch enqueues (once its unit of work commits)."""

    backend = "memory"

    def __init__(self) -> None:
        self.payloads: list[RunAccountPayload] = []

    async def enqueue(self, uow: Any, spec: Any, payload: Any, **_: Any) -> None:
        async def keep() -> None:
            self.payloads.append(payload)

        uow.after_commit(keep)


async def test_ar3_night_budget_reset_end_to_end_across_a_night(
    runtime: Runtime, clock: ManualClock, world: GraphWorld
) -> None:
    """Created from the template it stays a draft (nothing dispatched); set live, the 10-second
    sweep dispatches it once, at 23:00 in the workspace's zone (22:00 UTC in March), and the worker
    sets every campaign's budget; the rest of the night and the next morning nothing else runs."""
    ws = await create_workspace(runtime, name="Night", timezone="Europe/Berlin")
    world.add_account("act_3003", "Berlin shop", currency="EUR", timezone_name="Europe/Berlin")
    world.grant(JOB_TOKEN, "act_3003")
    campaigns = world.add_campaigns("act_3003", 3, daily_budget=5000)
    world.campaign(campaigns[1].id).daily_budget = 8000
    await store_token(runtime, ws.workspace_id, JOB_TOKEN)
    account = await create_account(
        runtime,
        workspace_id=ws.workspace_id,
        meta_id="act_3003",
        currency="EUR",
        timezone_name="Europe/Berlin",
    )

    async with runtime.db.write() as uow:
        rule = await create_from_template(
            uow.session,
            runtime.secrets,
            shared_guard(runtime.resources, runtime.settings.integrations),
            workspace_id=ws.workspace_id,
            key="night_budget_reset",
            data=FromTemplateIn(
                account_ids=[account.id], params=TemplateParams(amount=Decimal("20.00"), hour=23)
            ),
            now=clock.now(),
        )
    assert rule.status == "draft"

    clients = make_clients(world.base_url)
    graph = GraphClient(world.base_url, "v21.0")
    queue = RecordingQueue()
    deps = dispatch_deps(runtime, graph=graph, queue=queue)  # type: ignore[arg-type]
    dispatched_at: list[datetime] = []

    async def sweep_until(end: datetime) -> None:
        while clock.now() < end:
            clock.advance(10)
            await dispatch_due(deps, clock.now(), clock.now)
            while queue.payloads:
                payload = queue.payloads.pop(0)
                dispatched_at.append(clock.now())
                await run_account_job(make_deps(runtime, clients), payload)

    try:
        # A draft is never dispatched, however long it waits.
        await sweep_until(clock.now() + timedelta(hours=1))
        assert dispatched_at == []
        assert world.updates == []

        async with runtime.db.write() as uow:
            await rule_service.set_status(
                uow.session,
                workspace_id=ws.workspace_id,
                rule_id=rule.id,
                status="active",
                now=clock.now(),
            )
        async with runtime.db.read() as session:
            stored = await session.get(Rule, rule.id)
        assert stored is not None
        assert stored.next_execution_at == datetime(2026, 3, 2, 22, 0, tzinfo=UTC)

        # 10:00 → the next morning, sweeping every 10 seconds of manual time in 10-minute jumps.
        while clock.now() < datetime(2026, 3, 3, 9, 0, tzinfo=UTC):
            clock.advance(600 - 10)
            await sweep_until(clock.now() + timedelta(seconds=10))
    finally:
        await clients.aclose()
        await graph.aclose()

    assert dispatched_at == [datetime(2026, 3, 2, 22, 0, tzinfo=UTC)]
    assert sorted(world.updates) == sorted((c.id, {"daily_budget": "2000"}) for c in campaigns)
    assert {world.campaign(c.id).daily_budget for c in campaigns} == {2000}
    async with runtime.db.read() as session:
        records = (
            await session.scalars(select(ExecutionRecord).where(ExecutionRecord.rule_id == rule.id))
        ).all()
    assert sorted((r.status, str(r.before)) for r in records) == [
        ("executed", "{'daily_budget': '50.00'}"),
        ("executed", "{'daily_budget': '50.00'}"),
        ("executed", "{'daily_budget': '80.00'}"),
    ]
    assert all(r.conditions[0]["seen"].startswith("mon 23:00") for r in records)
