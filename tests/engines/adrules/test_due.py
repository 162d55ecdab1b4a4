"""Scheduling as pure functions (AR-5 to AR-8): interval, weekly timetable in the workspace's time
zone (across daylight-saving changes), and the date window."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.engines.adrules.due import (
    first_execution,
    following_execution,
    next_slot,
    window_of,
)
from app.engines.adrules.schemas import IntervalSchedule, TimetableSchedule, WeeklyGrid

BERLIN = ZoneInfo("Europe/Berlin")
UTC_ZONE = ZoneInfo("UTC")


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_ar6_interval_defaults_to_60_minutes() -> None:
    now = utc(2026, 3, 2, 9, 0)
    assert IntervalSchedule().minutes == 60
    assert following_execution(IntervalSchedule(), now=now, tz=UTC_ZONE) == now + timedelta(hours=1)


def test_ar6_interval_adds_the_rules_minutes() -> None:
    now = utc(2026, 3, 2, 9, 0, 7)
    schedule = IntervalSchedule(minutes=15)
    assert following_execution(schedule, now=now, tz=UTC_ZONE) == now + timedelta(minutes=15)


def test_ar6_an_activated_interval_rule_runs_at_once() -> None:
    now = utc(2026, 3, 2, 9, 0)
    assert first_execution(IntervalSchedule(minutes=30), now=now, tz=BERLIN) == now


def test_ar7_next_slot_later_today_is_taken() -> None:
    week = WeeklyGrid(mon=["18:00", "08:00", "12:30"])
    # 2026-03-02 is a Monday; 10:00 Berlin = 09:00 UTC.
    assert next_slot(week, utc(2026, 3, 2, 9, 0), BERLIN) == utc(2026, 3, 2, 11, 30)


def test_ar7_no_slot_left_today_scans_forward_to_the_earliest_slot_of_the_next_day() -> None:
    week = WeeklyGrid(mon=["08:00"], wed=["21:00", "06:15"])
    # Monday 20:00 Berlin: nothing left today, Tuesday empty, Wednesday's earliest is 06:15.
    assert next_slot(week, utc(2026, 3, 2, 19, 0), BERLIN) == utc(2026, 3, 4, 5, 15)


def test_ar7_a_slot_exactly_now_is_not_taken_again() -> None:
    week = WeeklyGrid(mon=["10:00"])
    now = utc(2026, 3, 2, 9, 0)  # Monday 10:00 Berlin
    assert next_slot(week, now, BERLIN) == utc(2026, 3, 9, 9, 0)


def test_ar7_a_single_weekly_slot_recurs_a_week_later() -> None:
    week = WeeklyGrid(mon=["09:00"])
    assert next_slot(week, utc(2026, 3, 2, 8, 30), BERLIN) == utc(2026, 3, 9, 8, 0)


def test_ar7_dst_spring_forward_keeps_local_wall_clock_time() -> None:
    """Europe/Berlin moves to summer time on Sunday 2026-03-29: 09:00 local is 08:00 UTC on the
    Saturday and 07:00 UTC on the Sunday."""
    week = WeeklyGrid(sat=["09:00"], sun=["09:00"])
    saturday = next_slot(week, utc(2026, 3, 28, 0, 0), BERLIN)
    assert saturday == utc(2026, 3, 28, 8, 0)
    sunday = next_slot(week, saturday, BERLIN)
    assert sunday == utc(2026, 3, 29, 7, 0)
    assert sunday - saturday == timedelta(hours=23)


def test_ar7_dst_a_time_inside_the_spring_forward_gap_runs_once_past_the_gap() -> None:
    week = WeeklyGrid(sun=["02:30"])
    slot = next_slot(week, utc(2026, 3, 28, 12, 0), BERLIN)
    # 02:30 does not exist on 2026-03-29 in Berlin; it runs at 01:30 UTC (03:30 summer time).
    assert slot == utc(2026, 3, 29, 1, 30)
    assert slot.astimezone(BERLIN).hour == 3


def test_ar7_dst_fall_back_runs_a_repeated_time_once() -> None:
    week = WeeklyGrid(sun=["02:30"])
    first = next_slot(week, utc(2026, 10, 24, 12, 0), BERLIN)
    assert first == utc(2026, 10, 25, 0, 30)  # the first 02:30 (summer time)
    assert next_slot(week, first, BERLIN) == utc(2026, 11, 1, 1, 30)


def test_ar7_timetable_in_the_workspace_zone_not_utc() -> None:
    week = WeeklyGrid(mon=["09:00"])
    tokyo = next_slot(week, utc(2026, 3, 1, 0, 0), ZoneInfo("Asia/Tokyo"))
    assert tokyo == utc(2026, 3, 2, 0, 0)


def test_ar7_empty_grid_is_refused() -> None:
    with pytest.raises(ValueError, match="no times"):
        next_slot(WeeklyGrid(), utc(2026, 3, 2), BERLIN)


def test_ar8_window_is_local_dates() -> None:
    window = window_of(
        IntervalSchedule(start_date=date(2026, 3, 10), end_date=date(2026, 3, 12)), BERLIN
    )
    assert window.starts_at == utc(2026, 3, 9, 23, 0)
    assert window.ends_at == utc(2026, 3, 12, 23, 0)
    assert not window.is_open(utc(2026, 3, 9, 22, 59))
    assert window.is_open(utc(2026, 3, 9, 23, 0))
    assert window.is_open(utc(2026, 3, 12, 22, 59))
    assert not window.is_open(utc(2026, 3, 12, 23, 0))


def test_ar8_first_run_waits_for_the_window_to_open() -> None:
    now = utc(2026, 3, 2, 9, 0)
    interval = IntervalSchedule(minutes=30, start_date=date(2026, 3, 5))
    assert first_execution(interval, now=now, tz=UTC_ZONE) == utc(2026, 3, 5, 0, 0)
    timetable = TimetableSchedule(
        week=WeeklyGrid(thu=["00:00", "07:00"]), start_date=date(2026, 3, 5)
    )
    assert first_execution(timetable, now=now, tz=UTC_ZONE) == utc(2026, 3, 5, 0, 0)


def test_ar8_no_run_after_the_window_ends() -> None:
    schedule = IntervalSchedule(minutes=60, end_date=date(2026, 3, 2))
    # The window ends at local midnight after the end date.
    assert following_execution(schedule, now=utc(2026, 3, 2, 23, 30), tz=UTC_ZONE) is None
    assert following_execution(schedule, now=utc(2026, 3, 2, 22, 30), tz=UTC_ZONE) == utc(
        2026, 3, 2, 23, 30
    )
    assert first_execution(schedule, now=utc(2026, 3, 3, 0, 0), tz=UTC_ZONE) is None


def test_ar8_timetable_stops_at_the_window_end() -> None:
    schedule = TimetableSchedule(week=WeeklyGrid(mon=["09:00"]), end_date=date(2026, 3, 8))
    assert following_execution(schedule, now=utc(2026, 3, 2, 9, 0), tz=UTC_ZONE) is None
