"""Guards across rules (spec AR-21, issue "rules fight"): a task's cooldown only stops that task,
so two rules could raise and lower one budget minute after minute. Before a budget write:

* no object's budget changes more than ``max_per_hour`` times in an hour, whichever rules made
  the changes (Meta allows about 4 budget changes per hour per object);
* a change that reverses another rule's change on the same object while that rule's cooldown
  still runs is refused, naming the other rule.

Both read the executed records of the object (every rule), plus the changes this run already
made and has not yet committed. A refused write is recorded as ``skipped`` with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import select

from app.db.session import ReadSession
from app.db.tenancy import scoped_select
from app.engines.adrules.models import Rule
from app.engines.adrules.run_models import RECORD_EXECUTED, ExecutionRecord

BUDGET_ACTIONS = ("increase_budget", "decrease_budget", "set_budget")
HOUR = timedelta(hours=1)
GUARD_REASON = "cross_rule_guard"


@dataclass(frozen=True, slots=True)
class BudgetChange:
    """One executed budget change of an object."""

    rule_id: int
    rule_name: str
    at: datetime
    direction: int
    """+1 raised, -1 lowered, 0 unknown."""
    until: datetime | None
    """The changing task's next permitted time (its cooldown); None: once in a lifetime."""


def direction(before: dict[str, Any] | None, after: dict[str, Any] | None) -> int:
    """+1 when the (daily or lifetime) budget went up, -1 down, 0 when it cannot be told."""
    key = "daily_budget" if "daily_budget" in (after or {}) else "lifetime_budget"
    try:
        old = Decimal(str((before or {})[key]))
        new = Decimal(str((after or {})[key]))
    except (KeyError, InvalidOperation):
        return 0
    return (new > old) - (new < old)


async def budget_changes(
    session: ReadSession, ad_account_id: int, campaign_id: str, now: datetime
) -> list[BudgetChange]:
    """Executed budget changes of one object still relevant at ``now``: within the hour, or
    whose task's cooldown has not run out (the reversal guard needs those)."""
    rows = await session.execute(
        select(
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
            ExecutionRecord.campaign_id == campaign_id,
            ExecutionRecord.status == RECORD_EXECUTED,
            ExecutionRecord.action.in_(BUDGET_ACTIONS),
            (ExecutionRecord.created_at > now - HOUR)
            | (ExecutionRecord.next_permitted_at.is_(None))
            | (ExecutionRecord.next_permitted_at > now),
        )
        .order_by(ExecutionRecord.created_at)
    )
    return [
        BudgetChange(rule_id, name, at, direction(before, after), until)
        for rule_id, name, at, before, after, until in rows.all()
    ]


def check_budget_write(
    changes: Sequence[BudgetChange],
    *,
    rule_id: int,
    planned_direction: int,
    now: datetime,
    max_per_hour: int,
) -> str | None:
    """Why the planned budget write must not happen, or None when it may."""
    recent = [c for c in changes if c.at > now - HOUR]
    if len(recent) >= max_per_hour:
        rules = sorted({c.rule_name for c in recent})
        return (
            f"{GUARD_REASON}: the budget of this object already changed {len(recent)} times in "
            f"the last hour (limit {max_per_hour}, Meta's is about 4), by {', '.join(rules)}"
        )
    for change in reversed(changes):
        if change.rule_id == rule_id or change.direction == 0 or planned_direction == 0:
            continue
        still_cooling = change.until is None or change.until > now
        if change.direction == -planned_direction and still_cooling:
            verb = "raised" if change.direction > 0 else "lowered"
            until = (
                "for good (once in a lifetime)"
                if change.until is None
                else f"until {change.until:%Y-%m-%d %H:%M} UTC"
            )
            return (
                f"{GUARD_REASON}: rule {change.rule_name!r} (id {change.rule_id}) {verb} this "
                f"budget at {change.at:%Y-%m-%d %H:%M} UTC and its cooldown holds {until}; "
                "reversing it now would make the rules fight"
            )
        break  # only the latest change by another rule can be reversed
    return None


def task_direction(document: dict[str, Any]) -> int:
    """+1 for a task that raises budgets, -1 for one that lowers them, 0 otherwise."""
    kind = (document.get("action") or {}).get("type")
    return {"increase_budget": 1, "decrease_budget": -1}.get(str(kind), 0)


async def opposing_rules(
    session: ReadSession, *, workspace_id: int, rule_id: int, ad_account_id: int
) -> list[str]:
    """Warnings for a preview: other active rules on the same ad account whose budget tasks go
    the other way from this rule's (they would fight over the same campaigns; the guard then
    skips the reversal inside a cooldown)."""
    from app.engines.adrules.models import RuleAccount, Task

    rows = (
        await session.execute(
            scoped_select(Rule, workspace_id, Task.rule_id, Rule.name, Task.document)
            .join(Rule, Rule.id == Task.rule_id)
            .join(RuleAccount, RuleAccount.rule_id == Rule.id)
            .where(
                RuleAccount.ad_account_id == ad_account_id,
                Task.archived_at.is_(None),
                (Rule.id == rule_id) | (Rule.status == "active"),
            )
        )
    ).all()
    mine = {task_direction(doc) for rid, _, doc in rows if rid == rule_id} - {0}
    warnings: dict[int, str] = {}
    for rid, name, doc in rows:
        theirs = task_direction(doc)
        if rid == rule_id or theirs == 0 or -theirs not in mine:
            continue
        verb = "raises" if theirs > 0 else "lowers"
        warnings[rid] = (
            f"active rule {name!r} (id {rid}) {verb} budgets on this ad account while this rule "
            "moves them the other way; where both select a campaign, a reversal inside the other "
            "rule's cooldown will be skipped"
        )
    return [warnings[k] for k in sorted(warnings)]
