"""Budgets over time, read back from the records (spec AR-25; the rule log's charts).

Every executed budget action records the object's budget before and after the write (major units,
exact decimal text). Read back per object — a campaign, ad set or ad, whatever the rule's level —
they are the object's budget history as the rule changed it. Reads go through the partial index of
executed records by task and object, and are bounded by ``limit`` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation

from sqlalchemy import select

from app.db.session import ReadSession
from app.db.tenancy import scoped_select
from app.engines.adrules.models import Batch, Task
from app.engines.adrules.run_models import RECORD_EXECUTED, ExecutionRecord

BUDGET_ACTIONS = ("increase_budget", "decrease_budget", "set_budget")
BUDGET_KEYS = ("daily_budget", "lifetime_budget")
LIMIT = 2_000
"""Most records one history reads (the newest)."""


@dataclass(frozen=True, slots=True)
class BudgetPoint:
    at: datetime
    before: Decimal
    after: Decimal
    budget: str
    """``daily_budget`` or ``lifetime_budget``."""


@dataclass(slots=True)
class ObjectBudgets:
    """One object's recorded budget changes, oldest first."""

    object_id: str
    name: str
    points: list[BudgetPoint] = field(default_factory=list)


def _decimal(value: object) -> Decimal | None:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def _point(record: ExecutionRecord) -> BudgetPoint | None:
    before, after = record.before or {}, record.after or {}
    for key in BUDGET_KEYS:
        if key in before and key in after:
            old, new = _decimal(before[key]), _decimal(after[key])
            if old is not None and new is not None:
                return BudgetPoint(record.created_at, old, new, key)
    return None


async def rule_budgets(
    session: ReadSession,
    workspace_id: int,
    rule_id: int,
    *,
    object_ids: Sequence[str] | None = None,
    status: str = RECORD_EXECUTED,
    limit: int = LIMIT,
) -> list[ObjectBudgets]:
    """The budget changes a rule's records hold per object (``object_ids``: only those), objects
    most recently changed first. ``status`` is ``would_execute`` for a shadow rule's plans."""
    if object_ids is not None and not object_ids:
        return []
    tasks = scoped_select(Task, workspace_id, Task.id).where(Task.rule_id == rule_id)
    stmt = select(ExecutionRecord).where(
        ExecutionRecord.status == status,
        ExecutionRecord.task_id.in_(tasks.scalar_subquery()),
        ExecutionRecord.action.in_(BUDGET_ACTIONS),
    )
    if object_ids is not None:
        stmt = stmt.where(ExecutionRecord.campaign_id.in_(list(object_ids)))
    rows = await session.scalars(
        stmt.order_by(ExecutionRecord.created_at.desc(), ExecutionRecord.id.desc()).limit(limit)
    )
    by_object: dict[str, ObjectBudgets] = {}
    for record in rows.all():  # newest first: the first seen object is the latest changed
        point = _point(record)
        if point is None:
            continue
        entry = by_object.setdefault(
            record.campaign_id, ObjectBudgets(record.campaign_id, record.campaign_name)
        )
        entry.points.append(point)
    for entry in by_object.values():
        entry.points.reverse()
    return list(by_object.values())


async def batch_budget_objects(session: ReadSession, batch: Batch, status: str) -> list[str]:
    """The objects whose budget one batch changed (or, in a shadow batch, would have)."""
    rows = await session.scalars(
        scoped_select(ExecutionRecord, batch.workspace_id, ExecutionRecord.campaign_id)
        .where(
            ExecutionRecord.batch_id == batch.batch_id,
            ExecutionRecord.ad_account_id == batch.ad_account_id,
            ExecutionRecord.status == status,
            ExecutionRecord.action.in_(BUDGET_ACTIONS),
        )
        .distinct()
        .limit(LIMIT)
    )
    return list(rows.all())
