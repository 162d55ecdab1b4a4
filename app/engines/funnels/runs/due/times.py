"""Pure time arithmetic of the engine: when a wait ends, and when quiet hours let a message out.

Everything is computed in the contact's civil time and converted back to UTC, so "three days, at
9 am" is 9 am local on both sides of a daylight-saving change. Non-existent local times (the hour
skipped in spring) move forward by the gap; ambiguous ones (the hour repeated in autumn) take the
first — the one policy of :mod:`app.scheduling.zones`.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from app.scheduling.zones import local_to_utc


def duration_end(
    now: datetime,
    tz: ZoneInfo,
    *,
    days: int,
    hours: int,
    minutes: int,
    hour: int | None,
    minute: int,
) -> datetime:
    """End of a duration wait. Days are calendar days in the contact's zone; with ``hour`` the
    wait lands at that local time of the resulting day."""
    local = now.astimezone(tz)
    if hour is None:
        moved = local_to_utc(local.date() + timedelta(days=days), local.time(), tz) if days else now
        return moved + timedelta(hours=hours, minutes=minutes)
    target_day = (local + timedelta(hours=hours, minutes=minutes)).date() + timedelta(days=days)
    return local_to_utc(target_day, time(hour, minute), tz)


def next_weekday_at(now: datetime, tz: ZoneInfo, weekday: int, hour: int, minute: int) -> datetime:
    """The next time it is ``weekday`` at ``hour:minute`` local (strictly after ``now``)."""
    local = now.astimezone(tz)
    for ahead in range(8):
        day = local.date() + timedelta(days=ahead)
        if day.weekday() != weekday:
            continue
        candidate = local_to_utc(day, time(hour, minute), tz)
        if candidate > now:
            return candidate
    raise AssertionError("a weekday recurs within 8 days")


def field_date_at(
    value: str, offset_days: int, tz: ZoneInfo, hour: int, minute: int
) -> datetime | None:
    """``value`` (an ISO date field) plus ``offset_days``, at ``hour:minute`` local."""
    try:
        day = date.fromisoformat(value[:10])
    except (TypeError, ValueError):
        return None
    return local_to_utc(day + timedelta(days=offset_days), time(hour, minute), tz)


def quiet_release(now: datetime, tz: ZoneInfo, start_hour: int, end_hour: int) -> datetime:
    """``now`` if it is outside quiet hours in ``tz``; otherwise the next ``end_hour`` local.

    Quiet hours may wrap midnight (21 → 8) or not (12 → 14)."""
    local = now.astimezone(tz)
    h = local.hour
    quiet = (
        (start_hour <= h or h < end_hour) if start_hour > end_hour else start_hour <= h < end_hour
    )
    if not quiet:
        return now
    day = local.date()
    if h >= end_hour:
        day += timedelta(days=1)
    return local_to_utc(day, time(end_hour, 0), tz)
