"""The range a backtest replays, and the days each reporting period covers on a given day.

Meta keeps Insights for 37 months; a backtest range must lie in that past, end before today and
not be reversed. Reporting periods follow Meta's ``date_preset`` meaning relative to the day
evaluated ("today"): ``last_7d`` is the seven days before it, ``this_month`` the month so far
with it, ``last_month`` the calendar month before.
"""

from __future__ import annotations

from datetime import date, timedelta

from app.errors import ValidationFailed

RETENTION_MONTHS = 37
"""How far back the Insights API reports (Meta's documented retention of Insights data)."""
LIFETIME_LOOKBACK_DAYS = 90
"""``lifetime`` conditions add up this many days before the range (not the whole lifetime)."""

_LAST_N = {
    "last_3d": 3,
    "last_7d": 7,
    "last_14d": 14,
    "last_28d": 28,
    "last_30d": 30,
    "last_90d": 90,
}


def months_before(day: date, months: int) -> date:
    """``day`` moved back by calendar months (clamped to the end of a shorter month)."""
    total = day.year * 12 + (day.month - 1) - months
    year, month0 = divmod(total, 12)
    for last in (31, 30, 29, 28):
        try:
            return date(year, month0 + 1, min(day.day, last))
        except ValueError:
            continue
    raise AssertionError("unreachable")  # pragma: no cover


def earliest_day(today: date) -> date:
    """The first day whose Insights Meta still reports."""
    return months_before(today, RETENTION_MONTHS)


def check_range(since: date, until: date, today: date) -> None:
    """Raise :class:`ValidationFailed` naming the field when the range cannot be replayed."""
    if until < since:
        raise ValidationFailed.field("until", "must be on or after since (the range is reversed)")
    if until >= today:
        raise ValidationFailed.field(
            "until",
            f"must be in the past: {today.isoformat()} is today, so yesterday "
            f"({(today - timedelta(days=1)).isoformat()}) is the latest day with complete Insights",
        )
    first = earliest_day(today)
    if since < first:
        raise ValidationFailed.field(
            "since",
            f"Meta keeps Insights for {RETENTION_MONTHS} months: the earliest day is "
            f"{first.isoformat()}",
        )


def period_days(period: str, day: date, data_since: date) -> tuple[date, date] | None:
    """First and last day (inclusive) ``period`` covers when ``day`` is today; None when it
    covers nothing read."""
    if period == "today":
        return day, day
    if period == "yesterday":
        return day - timedelta(days=1), day - timedelta(days=1)
    if period in _LAST_N:
        return day - timedelta(days=_LAST_N[period]), day - timedelta(days=1)
    if period == "this_month":
        return day.replace(day=1), day
    if period == "last_month":
        last = day.replace(day=1) - timedelta(days=1)
        return last.replace(day=1), last
    if period == "lifetime":
        return data_since, day
    raise ValueError(f"unknown period {period!r}")


def lookback_start(periods: set[str], since: date) -> date:
    """The first day to read so that every period is complete on the range's first day."""
    start = since
    for period in periods:
        if period == "lifetime":
            first = since - timedelta(days=LIFETIME_LOOKBACK_DAYS)
        else:
            covered = period_days(period, since, since)
            assert covered is not None
            first = covered[0]
        start = min(start, first)
    return start
