"""Other rules' budget changes on an ad account over a backtest's range, for the replay's
cross-rule guard: the executed budget records (they happened) of every rule but the one
replayed, whose own changes the replay makes anew. One read per account."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.db.session import ReadSession
from app.db.tenancy import scoped_select
from app.engines.adrules.models import Rule
from app.engines.adrules.run_models import RECORD_EXECUTED, ExecutionRecord
from app.engines.adrules.work.guards import BUDGET_ACTIONS, BudgetChange, direction

LONGEST_COOLDOWN = timedelta(days=7)
"""A change older than this before the range can still hold a reversal only when its task is
once in a lifetime."""
LIMIT = 50_000


async def other_rules_changes(
    session: ReadSession,
    *,
    workspace_id: int,
    ad_account_id: int,
    rule_id: int,
    start: datetime,
    end: datetime,
) -> dict[str, list[BudgetChange]]:
    """Per object id, the budget changes other rules of the workspace executed on the account
    from a cooldown before ``start`` to ``end``, oldest first."""
    rows = await session.execute(
        scoped_select(
            ExecutionRecord,
            workspace_id,
            ExecutionRecord.campaign_id,
            ExecutionRecord.rule_id,
            Rule.name,
            ExecutionRecord.created_at,
            ExecutionRecord.before,
            ExecutionRecord.after,
            ExecutionRecord.next_permitted_at,
        )
        .join(Rule, Rule.id == ExecutionRecord.rule_id)
        .where(
            ExecutionRecord.ad_account_id == ad_account_id,
            ExecutionRecord.rule_id != rule_id,
            ExecutionRecord.status == RECORD_EXECUTED,
            ExecutionRecord.action.in_(BUDGET_ACTIONS),
            ExecutionRecord.created_at <= end,
            (ExecutionRecord.created_at >= start - LONGEST_COOLDOWN)
            | ExecutionRecord.next_permitted_at.is_(None),
        )
        .order_by(ExecutionRecord.created_at, ExecutionRecord.id)
        .limit(LIMIT)
    )
    out: dict[str, list[BudgetChange]] = {}
    for object_id, other, name, at, before, after, until in rows.all():
        out.setdefault(object_id, []).append(
            BudgetChange(other, name, at, direction(before, after), until)
        )
    return out
