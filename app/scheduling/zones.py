"""Civil time in a named zone, with one daylight-saving policy for every engine.

A local time that does not exist (inside a spring-forward gap) moves forward by the length of the
gap — 02:30 on the night Berlin skips from 02:00 to 03:00 is 03:30 — and a local time that happens
twice (the hour repeated in autumn) is its first occurrence. This is what ``zoneinfo`` gives a
``fold=0`` time (PEP 495): the offset in force before the transition. Ad-rule timetables, funnel
waits and triggers all convert through :func:`local_to_utc`, so one wall-clock time means one
instant wherever it is written.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone_or_utc(name: str | None) -> ZoneInfo:
    """The zone called ``name``; UTC when it is empty or unknown to this machine's tz database
    (a stored name must never stop a sweep)."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def is_known_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def local_to_utc(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of the civil time ``day`` ``at`` in ``tz`` (gaps move forward by their
    length, repeated times take the first occurrence)."""
    return datetime.combine(day, at.replace(fold=0), tzinfo=tz).astimezone(UTC)
