"""Report periods, UTC: weeks from Monday 00:00 to the next Monday, calendar months from the 1st.

A report covers one whole period and is due at its end. Pure functions of the period and a time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

WEEKLY = "weekly"
MONTHLY = "monthly"
PERIODS = (WEEKLY, MONTHLY)


def _month(year: int, month: int) -> datetime:
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=UTC)


def period_start(period: str, at: datetime) -> datetime:
    """The start of the period containing ``at``."""
    at = at.astimezone(UTC)
    if period == WEEKLY:
        day = at.replace(hour=0, minute=0, second=0, microsecond=0)
        return day - timedelta(days=day.weekday())
    if period == MONTHLY:
        return _month(at.year, at.month)
    raise ValueError(f"unknown report period {period!r}")


def next_end(period: str, after: datetime) -> datetime:
    """The end of the period containing ``after`` (strictly later than ``after``)."""
    start = period_start(period, after)
    if period == WEEKLY:
        return start + timedelta(days=7)
    return _month(start.year, start.month + 1)


def previous_start(period: str, end: datetime) -> datetime:
    """The start of the period that ends at ``end`` (a period boundary)."""
    return period_start(period, end - timedelta(microseconds=1))


def label(period: str, start: datetime) -> str:
    if period == WEEKLY:
        last = start + timedelta(days=6)
        return f"week of {start:%Y-%m-%d} to {last:%Y-%m-%d}"
    return f"{start:%B %Y}"
