"""What one run did, summed up for a person (spec AR-27): pure functions of its records.

Counts per action and outcome over every record of the run (all its ad accounts), and the top
objects — those the run acted on, proposed or notified about — ranked by the size of the budget
change, then by the spend the conditions saw. The message formats read this and nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from app.engines.adrules.run_models import (
    RECORD_ERROR,
    RECORD_EXECUTED,
    RECORD_PROPOSED,
    RECORD_WOULD_EXECUTE,
)

TOP_OBJECTS = 10
"""Objects a digest names; the rest are counted."""
MATCHED = (RECORD_EXECUTED, RECORD_PROPOSED, RECORD_WOULD_EXECUTE)
BUDGET_FIELDS = ("daily_budget", "lifetime_budget")


@dataclass(frozen=True, slots=True)
class RecordRow:
    """The part of an execution record a digest reads."""

    task_id: int
    campaign_id: str
    campaign_name: str
    action: str
    status: str
    reason: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    conditions: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Count:
    action: str
    status: str
    count: int


@dataclass(frozen=True, slots=True)
class TopObject:
    id: str
    name: str
    action: str
    status: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    change: Decimal | None
    """The budget change in major units (after − before), None for other actions."""
    spend: Decimal | None
    """The spend a condition saw, when one looked at spend."""

    def describe(self) -> str:
        """One line: what happened to the object."""
        what = _change_text(self.before, self.after) or self.action.replace("_", " ")
        parts = [what]
        if self.spend is not None:
            parts.append(f"spend {self.spend}")
        if self.status != RECORD_EXECUTED:
            parts.append(self.status.replace("_", " "))
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Digest:
    rule_id: int
    rule_name: str
    batch_id: str
    at: datetime
    level: str
    accounts: tuple[str, ...]
    records: int
    objects: int
    """Distinct objects the run evaluated."""
    counts: tuple[Count, ...]
    top: tuple[TopObject, ...]
    matched: int
    """Objects the run acted on, proposed or notified about (the top ones are among them)."""
    errors: int
    proposals: int
    """Changes held for approval."""
    run_url: str
    approve_url: str | None
    """The signed approval link (a page that asks before it acts); None without proposals."""
    approve_until: datetime | None


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def budget_change(before: dict[str, Any] | None, after: dict[str, Any] | None) -> Decimal | None:
    for name in BUDGET_FIELDS:
        old = _decimal((before or {}).get(name))
        new = _decimal((after or {}).get(name))
        if old is not None and new is not None:
            return new - old
    return None


def seen_spend(conditions: Iterable[dict[str, Any]]) -> Decimal | None:
    for c in conditions:
        if str(c.get("text", "")).startswith("spend"):
            value = _decimal(c.get("seen"))
            if value is not None:
                return value
    return None


def _change_text(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str | None:
    if not before or not after:
        return None
    for name in (*BUDGET_FIELDS, "status", "name"):
        if name in before and name in after:
            return f"{name.replace('_', ' ')} {before[name]} → {after[name]}"
    return None


def top_objects(rows: Sequence[RecordRow], limit: int = TOP_OBJECTS) -> list[TopObject]:
    """The matched records ranked by |budget change|, then spend, then object id."""
    matched = [
        TopObject(
            id=r.campaign_id,
            name=r.campaign_name,
            action=r.action,
            status=r.status,
            before=r.before,
            after=r.after,
            change=budget_change(r.before, r.after),
            spend=seen_spend(r.conditions),
        )
        for r in rows
        if r.status in MATCHED
    ]
    matched.sort(
        key=lambda t: (
            -abs(t.change) if t.change is not None else Decimal(1),
            -(t.spend or Decimal(0)),
            t.id,
        )
    )
    return matched[:limit]


def build_digest(
    rows: Sequence[RecordRow],
    *,
    rule_id: int,
    rule_name: str,
    batch_id: str,
    at: datetime,
    level: str,
    accounts: Sequence[str],
    run_url: str,
    approve_url: str | None = None,
    approve_until: datetime | None = None,
    limit: int = TOP_OBJECTS,
) -> Digest:
    counter: Counter[tuple[str, str]] = Counter((r.action, r.status) for r in rows)
    counts = tuple(
        Count(action, status, n)
        for (action, status), n in sorted(counter.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    )
    proposals = counter_total(counter, RECORD_PROPOSED)
    return Digest(
        rule_id=rule_id,
        rule_name=rule_name,
        batch_id=batch_id,
        at=at,
        level=level,
        accounts=tuple(accounts),
        records=len(rows),
        objects=len({r.campaign_id for r in rows}),
        counts=counts,
        top=tuple(top_objects(rows, limit)),
        matched=len({r.campaign_id for r in rows if r.status in MATCHED}),
        errors=counter_total(counter, RECORD_ERROR),
        proposals=proposals,
        run_url=run_url,
        approve_url=approve_url if proposals else None,
        approve_until=approve_until if proposals else None,
    )


def counter_total(counter: Counter[tuple[str, str]], status: str) -> int:
    return sum(n for (_, s), n in counter.items() if s == status)


def worth_sending(rows: Sequence[RecordRow], task_ids: Iterable[int]) -> bool:
    """A channel hears of a run when its own notify task matched an object, or when changes wait
    for approval: a run where nothing happened sends nothing."""
    own = set(task_ids)
    return any(
        (r.task_id in own and r.status == RECORD_EXECUTED) or r.status == RECORD_PROPOSED
        for r in rows
    )
