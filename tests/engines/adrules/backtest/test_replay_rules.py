"""AR-26 the replay (pure) applies a run's own rules: Meta's budget changes per hour across a
rule's tasks, an archived object left alone, a notification that writes nothing, a once-in-a-
lifetime cooldown, and clock conditions read at the time of each day's evaluation."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal

from app.engines.adrules.backtest.replay import ReplayInput, replay
from app.engines.adrules.payloads import CampaignEntity
from app.engines.adrules.schemas import (
    ClockCondition,
    LogOnly,
    MetricValueCondition,
    PauseCampaign,
    SetBudget,
    TaskDocument,
)
from app.engines.adrules.work.metrics import InsightsRow

DAY = date(2026, 2, 20)
SPENT = MetricValueCondition(metric="spend", period="today", operator="gt", value=Decimal(1))


def _input(tasks: list[TaskDocument], objects: list[CampaignEntity], **kw: object) -> ReplayInput:
    rows = {
        o.id: {DAY: InsightsRow(spend=Decimal(5)), date(2026, 2, 21): InsightsRow(spend=Decimal(5))}
        for o in objects
    }
    return ReplayInput(
        rule_id=7,
        rule_name="Rule",
        level="campaign",
        tasks=tasks,
        objects=objects,
        rows=rows,
        currency="EUR",
        day_zone="Europe/Paris",
        clock_zone="Europe/Paris",
        days=kw.pop("days", [DAY]),  # type: ignore[arg-type]
        data_since=DAY,
        **kw,  # type: ignore[arg-type]
    )


def _campaign(cid: str = "1", status: str = "ACTIVE") -> CampaignEntity:
    return CampaignEntity(id=cid, name=f"C{cid}", effective_status=status, daily_budget=1000)


def test_ar26_metas_four_budget_changes_an_hour_hold_across_a_rules_tasks() -> None:
    tasks = [
        TaskDocument(
            id=i,
            name=f"Set {amount}",
            conditions=[SPENT],
            group="and",
            action=SetBudget(amount=Decimal(amount)),
            cooldown="15m",
        )
        for i, amount in enumerate((11, 12, 13, 14, 15), start=1)
    ]
    result = replay(_input(tasks, [_campaign()]))
    assert [a.outcome for a in result.actions] == ["would_execute"] * 4 + ["skipped"]
    assert (result.actions[-1].reason or "").startswith("cross_rule_guard: the budget of this")
    assert result.paths[0].days[0].budget == Decimal("14.00")
    assert result.budget_raised == Decimal("4.00")  # 10 → 11 → 12 → 13 → 14


def test_ar26_archived_objects_notifications_and_once_in_a_lifetime() -> None:
    tasks = [
        TaskDocument(
            id=1,
            name="Pause",
            conditions=[SPENT],
            group="and",
            action=PauseCampaign(),
            cooldown="lifetime",
        ),
        TaskDocument(
            id=2, name="Log", conditions=[SPENT], group="and", action=LogOnly(), cooldown="1h"
        ),
    ]
    result = replay(
        _input(tasks, [_campaign("1"), _campaign("2", "ARCHIVED")], days=[DAY, date(2026, 2, 21)])
    )
    outcomes = [(a.day.day, a.object_id, a.task_name, a.outcome) for a in result.actions]
    assert outcomes == [
        (20, "1", "Pause", "would_execute"),
        (20, "2", "Pause", "skipped"),
        (20, "1", "Log", "would_execute"),
        (20, "2", "Log", "would_execute"),
        (21, "1", "Pause", "skipped"),  # once in a lifetime: never again
        (21, "2", "Pause", "skipped"),
        (21, "1", "Log", "would_execute"),
        (21, "2", "Log", "would_execute"),
    ]
    assert (result.actions[1].reason or "").startswith("not_deliverable")
    assert "once in a lifetime" in (result.actions[4].reason or "")
    assert result.actions[2].before is None  # a notification changes nothing on Meta
    # Paused after the first evaluation: the second day's spend is what the pause would save.
    assert [d.paused_spend for d in result.paths[0].days] == [Decimal(0), Decimal(5)]


def test_ar26_clock_conditions_read_the_time_of_each_days_evaluation() -> None:
    night = TaskDocument(
        id=1,
        name="Night",
        conditions=[ClockCondition(hours=[6])],
        group="and",
        action=LogOnly(),
        cooldown="1h",
    )
    late = replay(_input([night], [_campaign()]))
    early = replay(_input([night], [_campaign()], evaluate_at=time(6, 30)))
    assert late.actions == []
    (action,) = early.actions
    assert action.at == datetime(2026, 2, 20, 5, 30, tzinfo=UTC)  # 06:30 in Paris


def test_ar26_an_object_paused_now_that_delivered_then_starts_active() -> None:
    """Paused by a person since the range: the rule's pause is found, and only the days after it
    count as spend the rule would have paused."""
    pause = TaskDocument(
        id=1, name="Pause", conditions=[SPENT], group="and", action=PauseCampaign(), cooldown="1h"
    )
    result = replay(_input([pause], [_campaign("1", "PAUSED")], days=[DAY, date(2026, 2, 21)]))
    assert [a.outcome for a in result.actions] == ["would_execute", "not_executed"]
    assert result.paths[0].start_status == "ACTIVE"
    assert [d.paused_spend for d in result.paths[0].days] == [Decimal(0), Decimal(5)]
