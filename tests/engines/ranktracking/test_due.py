"""Due times as pure functions (RT-8 to RT-11)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.engines.ranktracking.due import (
    RUNS_PER_MONTH,
    add_months,
    boundary,
    due_after_run,
    first_due,
    next_due,
)


def d(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("anchor", "frequency", "k", "expected"),
    [
        # RT-9 clamp table: the anchor day survives a short month.
        (d(2026, 1, 31, 9), "monthly", 1, d(2026, 2, 28, 9)),
        (d(2026, 1, 31, 9), "monthly", 2, d(2026, 3, 31, 9)),
        (d(2026, 1, 31, 9), "monthly", 3, d(2026, 4, 30, 9)),
        (d(2026, 1, 31, 9), "monthly", 4, d(2026, 5, 31, 9)),
        (d(2028, 1, 31, 9), "monthly", 1, d(2028, 2, 29, 9)),  # leap year
        (d(2028, 1, 31, 9), "monthly", 2, d(2028, 3, 31, 9)),
        (d(2026, 3, 30, 9), "monthly", 11, d(2027, 2, 28, 9)),
        (d(2026, 12, 31, 9), "monthly", 2, d(2027, 2, 28, 9)),
        # Quarterly from 30 November: February clamps, May gets the 30th back.
        (d(2026, 11, 30, 6), "quarterly", 1, d(2027, 2, 28, 6)),
        (d(2026, 11, 30, 6), "quarterly", 2, d(2027, 5, 30, 6)),
        (d(2026, 11, 30, 6), "quarterly", 3, d(2027, 8, 30, 6)),
        (d(2026, 11, 30, 6), "quarterly", 4, d(2027, 11, 30, 6)),
        (d(2027, 11, 30, 6), "quarterly", 1, d(2028, 2, 29, 6)),
        (d(2026, 3, 2, 9), "daily", 3, d(2026, 3, 5, 9)),
        (d(2026, 3, 2, 9), "weekly", 2, d(2026, 3, 16, 9)),
        (d(2026, 3, 2, 9), "biweekly", 2, d(2026, 3, 30, 9)),
    ],
)
def test_rt9_calendar_months_clamp_and_keep_the_anchor_day(
    anchor: datetime, frequency: str, k: int, expected: datetime
) -> None:
    assert boundary(anchor, frequency, k) == expected


def test_rt9_add_months_across_years() -> None:
    assert add_months(d(2026, 10, 31), 4) == d(2027, 2, 28)
    assert add_months(d(2026, 5, 15), -5) == d(2025, 12, 15)


def test_rt10_no_drift_after_a_late_provider() -> None:
    """Each next due comes from the previous scheduled boundary, whenever the work finished."""
    anchor = d(2026, 1, 31, 9, 0)
    due = first_due(anchor, "monthly")
    seen = []
    for late_hours in (1, 30, 5, 70, 2):
        # The sweep runs at :20 and the provider answers hours or days later; neither moves it.
        dispatched_at = due + timedelta(minutes=20)
        due = due_after_run(anchor, "monthly", due, dispatched_at)
        _provider_finished = dispatched_at + timedelta(hours=late_hours)
        seen.append(due)
    assert seen == [
        d(2026, 3, 31, 9),
        d(2026, 4, 30, 9),
        d(2026, 5, 31, 9),
        d(2026, 6, 30, 9),
        d(2026, 7, 31, 9),
    ]
    daily_anchor = d(2026, 3, 2, 9, 0)
    due = first_due(daily_anchor, "daily")
    for _ in range(30):
        due = due_after_run(daily_anchor, "daily", due, due + timedelta(minutes=20))
    assert due == d(2026, 4, 2, 9, 0)


def test_rt10_a_backlog_does_not_create_a_burst() -> None:
    anchor = d(2026, 3, 2, 9)
    # Dispatched three days late: the next due is the next boundary after now, not three catch-ups.
    assert due_after_run(anchor, "daily", d(2026, 3, 3, 9), d(2026, 3, 6, 10)) == d(2026, 3, 7, 9)


def test_rt10_rt11_reanchoring_moves_the_grid() -> None:
    """A manual run, a resume or a frequency change sets a new anchor at its start."""
    old_anchor = d(2026, 3, 2, 9)
    assert next_due(old_anchor, "weekly", d(2026, 3, 4, 15, 7)) == d(2026, 3, 9, 9)
    manual_at = d(2026, 3, 4, 15, 7)
    assert first_due(manual_at, "weekly") == d(2026, 3, 11, 15, 7)
    assert first_due(manual_at, "monthly") == d(2026, 4, 4, 15, 7)


def test_rt8_average_runs_per_month() -> None:
    assert RUNS_PER_MONTH["daily"] * 12 == 365
    assert RUNS_PER_MONTH["weekly"] * 12 == 52
    assert RUNS_PER_MONTH["biweekly"] * 12 == 26
    assert RUNS_PER_MONTH["monthly"] == 1
    assert RUNS_PER_MONTH["quarterly"] * 3 == 1
