"""What the API and the dashboard ask of journey analytics: the date range checked, the traces
loaded once, the series, the outcomes and the comparison of two versions."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta

from app.db.session import ReadSession
from app.engines.funnels.analytics.outcomes import (
    DEFAULT_WINDOWS,
    OutcomesReport,
    VersionComparison,
    compare,
    version_outcomes,
)
from app.engines.funnels.analytics.series import (
    MAX_DAYS,
    SeriesReport,
    daily_series,
    load_traces,
    series_csv_rows,
)
from app.errors import NotFound, ValidationFailed

DEFAULT_DAYS = 30
MAX_WINDOWS = 10
FIRST_DAY = date(1970, 1, 1)
LAST_DAY = date.max - timedelta(days=1)
"""The days a range may name: a day's end is the next day's start, which must exist."""


class VersionNotFound(NotFound):
    code = "version_not_found"


def date_range(start: date | None, end: date | None, today: date) -> tuple[date, date]:
    """The range asked for; by default the last 30 days up to today (UTC)."""
    for name, day in (("start", start), ("end", end)):
        if day is not None and not FIRST_DAY <= day <= LAST_DAY:
            raise ValidationFailed(f"{name}: a day from {FIRST_DAY} to {LAST_DAY}")
    end = end or today
    start = start or max(FIRST_DAY, end - timedelta(days=DEFAULT_DAYS - 1))
    if start > end:
        raise ValidationFailed("start: the first day must not be after the last day (end)")
    if (end - start).days + 1 > MAX_DAYS:
        raise ValidationFailed(f"start: at most {MAX_DAYS} days at a time")
    return start, end


def windows_of(raw: str | None) -> tuple[int, ...]:
    """``"1,7,30"`` → (1, 7, 30): the conversion windows in days."""
    if not raw:
        return DEFAULT_WINDOWS
    try:
        days = tuple(sorted({int(part) for part in raw.split(",") if part.strip()}))
    except ValueError:
        raise ValidationFailed("windows: whole numbers of days separated by commas") from None
    if not days or len(days) > MAX_WINDOWS or any(d < 1 or d > 365 for d in days):
        raise ValidationFailed(f"windows: 1 to {MAX_WINDOWS} numbers of days, each 1-365")
    return days


async def series(session: ReadSession, funnel_id: int, start: date, end: date) -> SeriesReport:
    return daily_series(await load_traces(session, funnel_id), funnel_id, start, end)


async def outcomes(
    session: ReadSession, funnel_id: int, windows: tuple[int, ...] = DEFAULT_WINDOWS
) -> OutcomesReport:
    return version_outcomes(await load_traces(session, funnel_id), funnel_id, windows)


async def comparison(
    session: ReadSession, funnel_id: int, a: int, b: int, windows: tuple[int, ...]
) -> VersionComparison:
    report = await outcomes(session, funnel_id, windows)
    by_number = {v.version: v for v in report.versions}
    for name, number in (("a", a), ("b", b)):
        if number not in by_number:
            raise VersionNotFound(f"{name}: the funnel has no published version {number}")
    return compare(by_number[a], by_number[b], funnel_id)


def to_csv(report: SeriesReport) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(series_csv_rows(report))
    return out.getvalue()
