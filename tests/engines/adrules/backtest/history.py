"""A known past for the backtest's tests: three campaigns of one New York ad account with their
daily Insights from 2026-02-17 to 2026-02-26, another rule's budget cut on one of them, and a rule
that pauses losers and scales winners. The simulated today is 2026-03-02."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from app.engines.adrules import records, rule_views
from app.engines.adrules.models import AdAccount
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.engines.adrules.factories import TOKEN, create_account, create_rule, store_token

ACCOUNT = "act_2001"
ZONE = "America/New_York"
TODAY = date(2026, 3, 2)
FIRST, LAST = date(2026, 2, 17), date(2026, 2, 26)
CUT_AT = datetime(2026, 2, 22, 12, 0, tzinfo=UTC)
"""When the other rule lowered campaign 30's budget (its cooldown: 3 days)."""

PAUSE_LOSERS = {
    "name": "Pause losers",
    "conditions": [
        {
            "type": "metric_value",
            "metric": "spend",
            "period": "today",
            "operator": "gt",
            "value": "40",
        },
        {
            "type": "metric_value",
            "metric": "purchase_roas",
            "period": "today",
            "operator": "lt",
            "value": "1",
        },
    ],
    "action": {"type": "pause_campaign"},
    "cooldown": "1h",
}
SCALE_WINNERS = {
    "name": "Scale winners",
    "conditions": [
        {
            "type": "metric_value",
            "metric": "purchase_roas",
            "period": "last_3d",
            "operator": "gt",
            "value": "3",
        }
    ],
    "action": {"type": "increase_budget", "by": "percent", "amount": "20", "max": "70"},
    "cooldown": "24h",
}


def row(spend: str, roas: str) -> dict[str, Any]:
    return {
        "spend": spend,
        "impressions": "1000",
        "purchase_roas": [{"action_type": "omni_purchase", "value": roas}],
    }


def days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def build_world(world: GraphWorld) -> None:
    world.today = TODAY
    world.add_account(ACCOUNT, "Shop NY", timezone_name=ZONE)
    world.grant(TOKEN, ACCOUNT)
    loser: dict[str, dict[str, Any] | None] = dict.fromkeys(days(FIRST, LAST), row("30.00", "2"))
    loser.update(
        {
            "2026-02-21": row("45.00", "0.5"),
            "2026-02-22": row("50.00", "0.2"),
            "2026-02-23": None,
            "2026-02-24": row("10.00", "0"),
            "2026-02-25": row("10.00", "0"),
            "2026-02-26": row("10.00", "0"),
        }
    )
    winner: dict[str, dict[str, Any] | None] = dict.fromkeys(days(FIRST, LAST), row("20.00", "4"))
    winner["2026-02-24"] = None
    fought: dict[str, dict[str, Any] | None] = dict.fromkeys(days(FIRST, LAST), row("20.00", "5"))
    for cid, name, budget, daily in (
        ("10", "Loser", 5000, loser),
        ("20", "Winner", 5000, winner),
        ("30", "Fought over", 4000, fought),
    ):
        world.add_campaign(
            ACCOUNT,
            SimCampaign(id=cid, name=name, daily_budget=budget, delivering=False, daily=daily),
        )


async def build_history(runtime: Runtime, workspace_id: int) -> tuple[AdAccount, int, int]:
    """The account, the rule to replay and the other rule (its budget cut recorded)."""
    await store_token(runtime, workspace_id)
    account = await create_account(
        runtime, workspace_id=workspace_id, meta_id=ACCOUNT, timezone_name=ZONE
    )
    rule_id = await create_rule(
        runtime,
        workspace_id=workspace_id,
        name="Losers and winners",
        status="draft",
        account_ids=[account.id],
        tasks=[PAUSE_LOSERS, SCALE_WINNERS],
    )
    other_id = await create_rule(
        runtime,
        workspace_id=workspace_id,
        name="Trim budgets",
        status="draft",
        account_ids=[account.id],
        tasks=[
            {
                "conditions": [
                    {"type": "metric_value", "metric": "spend", "operator": "gt", "value": "1"}
                ],
                "action": {"type": "decrease_budget", "by": "percent", "amount": "10", "min": "5"},
                "cooldown": "3d",
            }
        ],
    )
    async with runtime.db.read() as session:
        other = await rule_views.view_rule(session, workspace_id=workspace_id, rule_id=other_id)
    async with runtime.db.write() as uow:
        await records.insert_records(
            uow.session,
            [
                {
                    "workspace_id": workspace_id,
                    "rule_id": other_id,
                    "task_id": other.tasks[0].id,
                    "ad_account_id": account.id,
                    "batch_id": "b-past",
                    "campaign_id": "30",
                    "campaign_name": "Fought over",
                    "action": "decrease_budget",
                    "status": "executed",
                    "reason": None,
                    "parameters": {},
                    "before": {"daily_budget": "44.00"},
                    "after": {"daily_budget": "40.00"},
                    "conditions": [],
                    "steps": [],
                    "elapsed_seconds": 0.0,
                    "next_permitted_at": CUT_AT + timedelta(days=3),
                    "created_at": CUT_AT,
                }
            ],
        )
    return account, rule_id, other_id
