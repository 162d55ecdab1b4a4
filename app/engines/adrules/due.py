"""When a rule runs next: pure functions of the schedule, the workspace's time zone and ``now``.

The result is stored on the rule as ``next_execution_at`` (spec AR-5); the sweep reads that column and
never re-derives a schedule. Times of a weekly timetable are wall-clock times in the workspace's time
zone: across a daylight-saving change "09:00" stays 09:00 local (so its UTC instant moves); a time
that does not exist that day (inside the spring-forward gap) moves forward by the gap's length
(02:30 runs at 03:30 summer time), and a time that occurs twice (fall-back) runs once, at its first
occurrence — the one policy of :mod:`app.scheduling.zones`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from app.engines.adrules.schemas import IntervalSchedule, Schedule, TimetableSchedule, WeeklyGrid
from app.scheduling.zones import is_known_zone, local_to_utc


@dataclass(frozen=True, slots=True)
class Window:
    """The date window as UTC instants: from local midnight of the start date to local midnight
    after the end date. ``None`` is an open side."""

    starts_at: datetime | None
    ends_at: datetime | None

    def is_open(self, now: datetime) -> bool:
        return (self.starts_at is None or self.starts_at <= now) and (
            self.ends_at is None or now < self.ends_at
        )


def local_midnight(day: date, tz: ZoneInfo) -> datetime:
    """The UTC instant of 00:00 on ``day`` in ``tz``."""
    return local_to_utc(day, time(0, 0), tz)


def window_of(schedule: Schedule, tz: ZoneInfo) -> Window:
    """The rule's date window (spec AR-8), read in the workspace's time zone."""
    starts = local_midnight(schedule.start_date, tz) if schedule.start_date else None
    ends = local_midnight(schedule.end_date + timedelta(days=1), tz) if schedule.end_date else None
    return Window(starts, ends)


def _wall_clock(day: date, hhmm: str, tz: ZoneInfo) -> datetime:
    hours, minutes = (int(part) for part in hhmm.split(":"))
    return local_to_utc(day, time(hours, minutes), tz)


def next_slot(
    week: WeeklyGrid, after: datetime, tz: ZoneInfo, *, inclusive: bool = False
) -> datetime:
    """The first timetable slot later than ``after`` (or equal to it, with ``inclusive``).

    Today's remaining slots first; otherwise day by day forward, each day's slots sorted, the
    earliest taken (spec AR-7). Raises ``ValueError`` for an empty grid.
    """
    if week.is_empty():
        raise ValueError("the timetable has no times")
    local_day = after.astimezone(tz).date()
    # Eight days: today's slots may all be past, and the same weekday recurs on day 7.
    for offset in range(8):
        day = local_day + timedelta(days=offset)
        for hhmm in week.slots(day.weekday()):
            candidate = _wall_clock(day, hhmm, tz)
            if candidate > after or (inclusive and candidate == after):
                return candidate
    raise AssertionError("a non-empty weekly grid always has a slot within eight days")


def next_interval(minutes: int, now: datetime) -> datetime:
    """Interval mode after a run: now plus the rule's interval (spec AR-6)."""
    return now + timedelta(minutes=minutes)


def first_execution(schedule: Schedule, *, now: datetime, tz: ZoneInfo) -> datetime | None:
    """When a rule that was just activated (or whose schedule changed) runs first.

    Interval mode runs at once (or when the window opens); timetable mode at its next slot.
    ``None`` when the window has already closed. ``tz`` is the fallback zone (the schedule's own
    zone wins).
    """
    tz = schedule_zone(schedule, tz)
    window = window_of(schedule, tz)
    start_pending = window.starts_at is not None and now < window.starts_at
    base = window.starts_at if start_pending and window.starts_at is not None else now
    candidate: datetime
    if isinstance(schedule, IntervalSchedule):
        candidate = base
    else:
        candidate = next_slot(schedule.week, base, tz, inclusive=start_pending)
    return _inside(candidate, window)


def schedule_zone(schedule: Schedule, fallback: ZoneInfo) -> ZoneInfo:
    """The zone a schedule runs in: the one it names (its ad accounts' zone, stored when the rule
    was saved), else ``fallback`` (the workspace's)."""
    if schedule.timezone and is_known_zone(schedule.timezone):
        return ZoneInfo(schedule.timezone)
    return fallback


def following_execution(schedule: Schedule, *, now: datetime, tz: ZoneInfo) -> datetime | None:
    """When a rule that is being dispatched at ``now`` runs next; ``None`` when no run is left
    inside its window. ``tz`` is the fallback zone (the schedule's own zone wins)."""
    tz = schedule_zone(schedule, tz)
    window = window_of(schedule, tz)
    candidate: datetime
    if isinstance(schedule, IntervalSchedule):
        candidate = next_interval(schedule.minutes, now)
        if window.starts_at is not None and candidate < window.starts_at:
            candidate = window.starts_at
    else:
        assert isinstance(schedule, TimetableSchedule)
        start_pending = window.starts_at is not None and now < window.starts_at
        base = window.starts_at if start_pending and window.starts_at is not None else now
        candidate = next_slot(schedule.week, base, tz, inclusive=start_pending)
    return _inside(candidate, window)


def _inside(candidate: datetime, window: Window) -> datetime | None:
    if window.ends_at is not None and candidate >= window.ends_at:
        return None
    return candidate
