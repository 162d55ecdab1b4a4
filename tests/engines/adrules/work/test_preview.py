"""Preview (AR-4): a rule evaluated now against one ad account, per campaign every condition and
the action that would run — and the simulator's write counter stays at 0."""

from __future__ import annotations

import pytest

from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.work.preview import preview_rule
from app.errors import Conflict
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    make_clients,
    make_deps,
    store_token,
)


async def _deps(runtime: Runtime, world: GraphWorld) -> tuple[AdRulesDeps, object]:
    clients = make_clients(world.base_url)
    return make_deps(runtime, clients), clients


async def test_ar4_preview_shows_conditions_and_the_action_that_would_run_and_writes_nothing(
    runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    world.add_account("act_1001", "Shop")
    world.grant(TOKEN, "act_1001")
    world.add_campaign("act_1001", SimCampaign(id="11", name="Summer winners", daily_budget=5000))
    world.add_campaign(
        "act_1001", SimCampaign(id="12", name="Summer quiet", daily_budget=5000, delivering=False)
    )
    world.add_campaign("act_1001", SimCampaign(id="13", name="Winter", daily_budget=5000))
    await store_token(runtime, ws.workspace_id)
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1001")
    rule_id = await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        status="draft",
        account_ids=[account.id],
        prefilters={"name_contains": "Summer"},
        tasks=[
            {
                "name": "Scale",
                "conditions": [
                    {
                        "type": "metric_value",
                        "metric": "spend",
                        "period": "last_7d",
                        "operator": "gt",
                        "value": "1",
                    }
                ],
                "action": {"type": "increase_budget", "by": "percent", "amount": "50", "max": "60"},
                "cooldown": "24h",
            },
            {
                "name": "Pause",
                "conditions": [
                    {
                        "type": "metric_value",
                        "metric": "ctr",
                        "period": "today",
                        "operator": "lt",
                        "value": "100",
                    }
                ],
                "action": {"type": "pause_campaign"},
                "cooldown": "1h",
            },
        ],
    )
    deps, clients = await _deps(runtime, world)
    world.state.reset_counts()
    try:
        result = await preview_rule(
            deps, workspace_id=ws.workspace_id, rule_id=rule_id, ad_account_id=account.id
        )
    finally:
        await clients.aclose()  # type: ignore[attr-defined]

    assert world.count("campaign.update") == 0  # reading only
    assert world.updates == []
    assert [c.id for c in result.campaigns] == ["11", "12"]  # pre-filters applied on Meta's side
    active, quiet = result.campaigns
    scale, pause = active.tasks
    assert scale.would == "act"
    assert scale.conditions[0].passed
    assert scale.before == {"daily_budget": "50.00"}
    assert scale.after == {"daily_budget": "60.00", "clamped_at": "max", "projected": "75.00"}
    assert pause.would == "act"
    assert pause.after == {"status": "PAUSED"}
    # No delivery: spend is 0 (fails "> 1"), CTR has no value (fails, with why).
    q_scale, q_pause = quiet.tasks
    assert q_scale.would == "nothing"
    assert q_scale.conditions[0].seen == "0"
    assert q_pause.conditions[0].seen is None
    assert "no delivery" in (q_pause.conditions[0].reason or "")
    assert result.graph_calls == 1  # both campaigns' periods in one packed batch call


async def test_preview_of_an_inactive_account_is_refused(
    runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    world.add_account("act_1001", "Shop")
    world.grant(TOKEN, "act_1001")
    await store_token(runtime, ws.workspace_id)
    account = await create_account(
        runtime, workspace_id=ws.workspace_id, meta_id="act_1001", active=False
    )
    rule_id = await create_rule(runtime, workspace_id=ws.workspace_id, status="draft")
    deps, clients = await _deps(runtime, world)
    try:
        with pytest.raises(Conflict):
            await preview_rule(
                deps, workspace_id=ws.workspace_id, rule_id=rule_id, ad_account_id=account.id
            )
    finally:
        await clients.aclose()  # type: ignore[attr-defined]
    assert world.count("*") == 0


def _budget_task(kind: str) -> dict[str, object]:
    bound = {"max": "500"} if kind == "increase_budget" else {"min": "5"}
    return {
        "name": kind,
        "conditions": [
            {"type": "metric_value", "metric": "spend", "operator": "gte", "value": "0"}
        ],
        "action": {"type": kind, "by": "percent", "amount": "10", **bound},
        "cooldown": "1h",
    }


async def test_ar21_preview_warns_of_an_active_rule_moving_budgets_the_other_way(
    runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    world.add_account("act_1001", "Shop")
    world.grant(TOKEN, "act_1001")
    world.add_campaigns("act_1001", 1)
    await store_token(runtime, ws.workspace_id)
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1001")
    trim = await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        name="Trim",
        account_ids=[account.id],
        tasks=[_budget_task("decrease_budget")],
    )
    await create_rule(  # same direction: no warning
        runtime,
        workspace_id=ws.workspace_id,
        name="Also scale",
        account_ids=[account.id],
        tasks=[_budget_task("increase_budget")],
    )
    scale = await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        name="Scale",
        status="draft",
        account_ids=[account.id],
        tasks=[_budget_task("increase_budget")],
    )
    deps, clients = await _deps(runtime, world)
    try:
        result = await preview_rule(
            deps, workspace_id=ws.workspace_id, rule_id=scale, ad_account_id=account.id
        )
    finally:
        await clients.aclose()  # type: ignore[attr-defined]
    assert len(result.warnings) == 1
    assert f"'Trim' (id {trim}) lowers budgets" in result.warnings[0]
    assert result.timezone == "UTC"
    assert world.updates == []
