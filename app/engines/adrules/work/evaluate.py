"""Conditions: resolve each to a number, compare, fold with AND / OR (spec AR-9, AR-16).

Pure: everything a condition needs about one campaign is gathered first into
:class:`CampaignFacts` (Insights rows per period, the campaign's budgets and age, custom metric
values, the time), then :func:`evaluate_task` decides. Every condition is recorded with the value
it saw, the value it was compared with, whether it passed, and why not when a value was missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

import msgspec

from app.engines.adrules.catalogue import (
    OPERATOR_SYMBOLS,
    WEEKDAYS,
    GroupOperator,
    Operator,
)
from app.engines.adrules.schemas import (
    ClockCondition,
    Condition,
    CustomMetricCondition,
    MetricMetricCondition,
    MetricValueCondition,
)
from app.engines.adrules.work.metrics import (
    InsightsRow,
    campaign_age_days,
    hour_of_day,
    insights_value,
    is_insights_metric,
    local_time,
    weekday,
)

NO_ROW = "no delivery in the period"


@dataclass(frozen=True, slots=True)
class CustomKey:
    """Identifies one custom metric lookup of a campaign."""

    spreadsheet_id: str
    sheet_name: str
    lookup_column: str
    value_column: str
    locale: str | None = None

    @classmethod
    def of(cls, cond: CustomMetricCondition) -> CustomKey:
        return cls(
            cond.spreadsheet_id,
            cond.sheet_name,
            cond.lookup_column,
            cond.value_column,
            cond.locale,
        )


@dataclass(frozen=True, slots=True)
class CustomResult:
    value: Decimal | None
    error: str | None = None
    source: str = ""
    """Where the sheet's rows came from: ``live``, ``cache`` or ``copy`` (the database copy)."""
    fetched_at: datetime | None = None
    """When those rows were read from the Sheets API."""
    note: str | None = None
    """Why the database copy was used (the live read's error)."""
    sheet_failed: bool = False
    """The sheet itself could be read neither live nor from a usable copy (``error`` says why)."""


@dataclass(frozen=True, slots=True)
class CampaignFacts:
    """What is known about one campaign when its conditions are evaluated."""

    campaign_id: str
    name: str
    now: datetime
    timezone: str
    """The workspace's time zone (clock metrics are read on its wall clock)."""
    daily_budget: Decimal | None = None
    lifetime_budget: Decimal | None = None
    created_time: datetime | None = None
    rows: Mapping[str, InsightsRow | None] = field(default_factory=dict)
    """Insights row per reporting period; ``None`` for a period with no delivery."""
    custom: Mapping[CustomKey, CustomResult] = field(default_factory=dict)


class ConditionResult(msgspec.Struct, kw_only=True):
    """One condition as the record shows it."""

    index: int
    kind: str
    text: str
    """Readable form, e.g. ``purchase_roas (last_7d) < 1.2``."""
    seen: str | None
    """The value the engine saw (exact decimal text), ``None`` when there was none."""
    compared: str | None
    """What it was compared with (the fixed value, or multiplier × the other metric)."""
    passed: bool
    reason: str | None = None
    """Why it failed without a comparison (no value, a sheet error)."""
    source: str | None = None
    """A custom metric's rows: ``live``, ``cache`` or ``copy`` (the database copy of the sheet)."""
    source_age_seconds: int | None = None
    """How old those rows were when the condition was evaluated (from their read of the sheet)."""
    source_note: str | None = None
    """Why the database copy was used (the live read's error)."""
    sheet_failed: bool = False
    """The sheet could not be read at all (no live read, no usable copy): the record is an error,
    not a condition that was not met."""


class TaskEvaluation(msgspec.Struct, kw_only=True):
    passed: bool
    conditions: list[ConditionResult]


@dataclass(frozen=True, slots=True)
class Resolved:
    value: Decimal | None
    reason: str | None = None


def compare(left: Decimal, operator: Operator, right: Decimal) -> bool:
    if operator == "gt":
        return left > right
    if operator == "gte":
        return left >= right
    if operator == "lt":
        return left < right
    if operator == "lte":
        return left <= right
    if operator == "eq":
        return left == right
    return left != right


def resolve_metric(metric: str, period: str, facts: CampaignFacts) -> Resolved:
    """The value of a catalogue metric for one campaign (custom metrics have their own condition)."""
    if is_insights_metric(metric):
        if period not in facts.rows:
            return Resolved(None, f"{period} was not read")
        row = facts.rows[period]
        value = insights_value(metric, row)
        if value is None:
            why = NO_ROW if row is None else "its denominator is zero or Meta reported no value"
            return Resolved(None, f"{metric} has no value for {period}: {why}")
        return Resolved(value)
    if metric == "hour_of_day":
        return Resolved(hour_of_day(facts.now, facts.timezone))
    if metric == "weekday":
        return Resolved(weekday(facts.now, facts.timezone))
    if metric == "daily_budget":
        if facts.daily_budget is None:
            return Resolved(None, "the campaign has no daily budget (budget set on its ad sets?)")
        return Resolved(facts.daily_budget)
    if metric == "lifetime_budget":
        if facts.lifetime_budget is None:
            return Resolved(None, "the campaign has no lifetime budget")
        return Resolved(facts.lifetime_budget)
    if metric == "campaign_age_days":
        age = campaign_age_days(facts.created_time, facts.now)
        return Resolved(age, None if age is not None else "Meta gave no creation time")
    return Resolved(None, f"{metric} cannot be resolved here")


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _metric_label(metric: str, period: str) -> str:
    if is_insights_metric(metric):
        return f"{metric} ({period})"
    return metric


def evaluate_condition(index: int, cond: Condition, facts: CampaignFacts) -> ConditionResult:
    if isinstance(cond, MetricValueCondition):
        label = f"{_metric_label(cond.metric, cond.period)} {OPERATOR_SYMBOLS[cond.operator]} {cond.value}"
        got = resolve_metric(cond.metric, cond.period, facts)
        return _compared(index, "metric_value", label, got, cond.operator, cond.value)
    if isinstance(cond, MetricMetricCondition):
        other_label = _metric_label(cond.other_metric, cond.other_period)
        if cond.multiplier != 1:
            other_label = f"{cond.multiplier} × {other_label}"
        label = (
            f"{_metric_label(cond.metric, cond.period)} "
            f"{OPERATOR_SYMBOLS[cond.operator]} {other_label}"
        )
        got = resolve_metric(cond.metric, cond.period, facts)
        other = resolve_metric(cond.other_metric, cond.other_period, facts)
        if other.value is None:
            return ConditionResult(
                index=index,
                kind="metric_metric",
                text=label,
                seen=_text(got.value),
                compared=None,
                passed=False,
                reason=other.reason,
            )
        return _compared(
            index, "metric_metric", label, got, cond.operator, other.value * cond.multiplier
        )
    if isinstance(cond, ClockCondition):
        local = local_time(facts.now, facts.timezone)
        day = WEEKDAYS[local.weekday()]
        hours = ", ".join(f"{h:02d}h" for h in sorted(cond.hours))
        days = ", ".join(cond.weekdays)
        passed = local.hour in cond.hours and day in cond.weekdays
        return ConditionResult(
            index=index,
            kind="clock",
            text=f"local hour in {hours} on {days}",
            seen=f"{day} {local:%H:%M} ({facts.timezone})",
            compared=f"{hours} on {days}",
            passed=passed,
        )
    custom = facts.custom.get(CustomKey.of(cond))
    label = (
        f"custom metric {cond.sheet_name}!{cond.value_column} "
        f"{OPERATOR_SYMBOLS[cond.operator]} {cond.value}"
    )
    if custom is None:
        return _compared(
            index,
            "custom_metric",
            label,
            Resolved(None, "the custom metric was not read"),
            cond.operator,
            cond.value,
        )
    result = _compared(
        index,
        "custom_metric",
        label,
        Resolved(custom.value, custom.error),
        cond.operator,
        cond.value,
    )
    age = (
        None
        if custom.fetched_at is None
        else max(0, int((facts.now - custom.fetched_at).total_seconds()))
    )
    return msgspec.structs.replace(
        result,
        source=custom.source or None,
        source_age_seconds=age,
        source_note=custom.note,
        sheet_failed=custom.sheet_failed,
    )


def _compared(
    index: int, kind: str, label: str, got: Resolved, operator: Operator, right: Decimal
) -> ConditionResult:
    if got.value is None:
        return ConditionResult(
            index=index,
            kind=kind,
            text=label,
            seen=None,
            compared=str(right),
            passed=False,
            reason=got.reason or "no value",
        )
    return ConditionResult(
        index=index,
        kind=kind,
        text=label,
        seen=str(got.value),
        compared=str(right),
        passed=compare(got.value, operator, right),
    )


def fold(results: list[ConditionResult], group: GroupOperator) -> bool:
    """AND: every condition passed; OR: at least one. A task without conditions always passes."""
    if not results:
        return True
    if group == "and":
        return all(r.passed for r in results)
    return any(r.passed for r in results)


def evaluate_conditions(
    conditions: list[Condition], group: GroupOperator, facts: CampaignFacts
) -> TaskEvaluation:
    results = [evaluate_condition(i, c, facts) for i, c in enumerate(conditions)]
    return TaskEvaluation(passed=fold(results, group), conditions=results)
