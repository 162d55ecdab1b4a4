"""Conditions (AR-16, AR-9): six operators, metric vs metric across periods, AND vs OR, the no-row
rule, clock conditions in the workspace's time zone, and what each condition records."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import msgspec
import pytest

from app.engines.adrules.schemas import (
    ClockCondition,
    Condition,
    CustomMetricCondition,
    MetricMetricCondition,
    MetricValueCondition,
)
from app.engines.adrules.work.evaluate import (
    CampaignFacts,
    CustomKey,
    CustomResult,
    evaluate_conditions,
    resolve_metric,
)
from app.engines.adrules.work.metrics import InsightsRow

NOW = datetime(2026, 3, 2, 21, 30, tzinfo=UTC)  # Monday 22:30 in Berlin


def _row(**values: object) -> InsightsRow:
    return msgspec.convert(values, InsightsRow)


FACTS = CampaignFacts(
    campaign_id="1001",
    name="Spring sale",
    now=NOW,
    timezone="Europe/Berlin",
    daily_budget=Decimal("50.00"),
    lifetime_budget=None,
    created_time=datetime(2026, 2, 20, 8, 0, tzinfo=UTC),
    rows={
        "today": _row(spend="120.50", impressions="1000", clicks="20", ctr="2", cpc="6.025"),
        "last_7d": _row(spend="700.00", impressions="9000", clicks="90", ctr="1", cpc="7.777778"),
        "yesterday": None,  # no delivery
    },
)


def _value(metric: str, op: str, value: str, period: str = "today") -> MetricValueCondition:
    return MetricValueCondition(metric=metric, period=period, operator=op, value=Decimal(value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("op", "value", "passed"),
    [
        ("gt", "120.49", True),
        ("gt", "120.50", False),
        ("gte", "120.50", True),
        ("lt", "120.51", True),
        ("lt", "120.50", False),
        ("lte", "120.50", True),
        ("eq", "120.5", True),
        ("eq", "120.51", False),
        ("neq", "120.51", True),
        ("neq", "120.50", False),
    ],
)
def test_ar16_six_operators_against_a_value(op: str, value: str, passed: bool) -> None:
    result = evaluate_conditions([_value("spend", op, value)], "and", FACTS)
    assert result.passed is passed
    cond = result.conditions[0]
    assert cond.seen == "120.50"
    assert cond.compared == str(Decimal(value))
    assert cond.passed is passed


def test_ar16_metric_vs_metric_across_two_periods() -> None:
    """cpc today < cpc last 7 days, and spend today > 0.15 × spend last 7 days."""
    conditions: list[Condition] = [
        MetricMetricCondition(
            metric="cpc", period="today", operator="lt", other_metric="cpc", other_period="last_7d"
        ),
        MetricMetricCondition(
            metric="spend",
            period="today",
            operator="gt",
            other_metric="spend",
            other_period="last_7d",
            multiplier=Decimal("0.15"),
        ),
    ]
    result = evaluate_conditions(conditions, "and", FACTS)
    assert result.passed
    first, second = result.conditions
    assert (first.seen, first.compared) == ("6.025", "7.777778")
    assert (second.seen, second.compared) == ("120.50", "105.0000")
    assert first.text == "cpc (today) < cpc (last_7d)"


def test_ar16_and_versus_or() -> None:
    conditions: list[Condition] = [_value("spend", "gt", "100"), _value("clicks", "gt", "50")]
    and_result = evaluate_conditions(conditions, "and", FACTS)
    or_result = evaluate_conditions(conditions, "or", FACTS)
    assert [c.passed for c in and_result.conditions] == [True, False]
    assert not and_result.passed
    assert or_result.passed
    # Both results record every condition, whichever way they fold.
    assert len(or_result.conditions) == 2


def test_ar16_no_row_sums_are_zero_and_ratios_fail_with_a_reason() -> None:
    result = evaluate_conditions(
        [_value("spend", "eq", "0", "yesterday"), _value("ctr", "lt", "5", "yesterday")],
        "and",
        FACTS,
    )
    spend, ctr = result.conditions
    assert spend.passed
    assert spend.seen == "0"
    assert not ctr.passed
    assert ctr.seen is None
    assert ctr.reason is not None
    assert "no delivery" in ctr.reason
    assert not result.passed


def test_metric_vs_metric_with_no_value_on_the_other_side_fails_with_why() -> None:
    cond = MetricMetricCondition(
        metric="spend", operator="gt", other_metric="cpc", other_period="yesterday"
    )
    result = evaluate_conditions([cond], "and", FACTS)
    assert not result.passed
    assert result.conditions[0].seen == "120.50"
    assert result.conditions[0].compared is None
    assert "no delivery" in (result.conditions[0].reason or "")


def test_ar9_clock_condition_uses_the_workspace_time_zone() -> None:
    # 21:30 UTC is 22:30 in Berlin on a Monday.
    night = ClockCondition(hours=[22, 23], weekdays=["mon", "tue"])
    morning = ClockCondition(hours=[21], weekdays=["mon"])
    sunday = ClockCondition(hours=[22], weekdays=["sun"])
    result = evaluate_conditions([night, morning, sunday], "or", FACTS)
    assert [c.passed for c in result.conditions] == [True, False, False]
    assert result.conditions[0].seen == "mon 22:30 (Europe/Berlin)"


def test_other_metrics_hour_weekday_budget_and_age() -> None:
    assert resolve_metric("hour_of_day", "today", FACTS).value == 22
    assert resolve_metric("weekday", "today", FACTS).value == 0
    assert resolve_metric("daily_budget", "today", FACTS).value == Decimal("50.00")
    assert resolve_metric("campaign_age_days", "today", FACTS).value == 10
    missing = resolve_metric("lifetime_budget", "today", FACTS)
    assert missing.value is None
    assert missing.reason


def test_custom_metric_values_and_errors_are_recorded() -> None:
    cond = CustomMetricCondition(
        spreadsheet_id="sheet-abcdefghij",
        sheet_name="Targets",
        lookup_column="A",
        value_column="C",
        operator="gte",
        value=Decimal("2"),
    )
    ok = CampaignFacts(
        campaign_id="1001",
        name="x",
        now=NOW,
        timezone="UTC",
        custom={CustomKey.of(cond): CustomResult(Decimal("2.5"), source="live")},
    )
    bad = CampaignFacts(
        campaign_id="1001",
        name="x",
        now=NOW,
        timezone="UTC",
        custom={CustomKey.of(cond): CustomResult(None, "the cell C is not a number: 'n/a'")},
    )
    assert evaluate_conditions([cond], "and", ok).passed
    failed = evaluate_conditions([cond], "and", bad)
    assert not failed.passed
    assert failed.conditions[0].reason == "the cell C is not a number: 'n/a'"


def test_a_task_without_conditions_passes() -> None:
    assert evaluate_conditions([], "and", FACTS).passed
    assert evaluate_conditions([], "or", FACTS).passed
