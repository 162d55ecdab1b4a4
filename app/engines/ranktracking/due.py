"""Due times as pure functions of the anchor, the frequency and a moment (RT-8 to RT-11).

Every due time is ``anchor + k periods`` for a whole ``k``. Month-based frequencies count UTC
calendar months from the anchor and clamp an impossible day to the month's last day, so the anchor
day survives a short month: 31 January → 28/29 February → 31 March. Because each boundary is computed
from the anchor, never from the previous (possibly clamped) boundary or from when a provider
finished, there is no drift.
"""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta
from fractions import Fraction

SERP_FREQUENCIES = ("daily", "weekly", "biweekly", "monthly")
KEYWORD_DATA_FREQUENCIES = ("monthly", "quarterly")
FREQUENCIES = ("daily", "weekly", "biweekly", "monthly", "quarterly")

_DAYS = {"daily": 1, "weekly": 7, "biweekly": 14}
_MONTHS = {"monthly": 1, "quarterly": 3}

RUNS_PER_MONTH: dict[str, Fraction] = {
    "daily": Fraction(365, 12),
    "weekly": Fraction(52, 12),
    "biweekly": Fraction(26, 12),
    "monthly": Fraction(1),
    "quarterly": Fraction(1, 3),
}
"""Average runs per month used by the monthly projection (RT-8)."""


def add_months(anchor: datetime, months: int) -> datetime:
    """``anchor`` moved by ``months`` calendar months, the day clamped to the month's end."""
    index = anchor.year * 12 + (anchor.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    day = min(anchor.day, calendar.monthrange(year, month)[1])
    return anchor.replace(year=year, month=month, day=day)


def boundary(anchor: datetime, frequency: str, k: int) -> datetime:
    """The ``k``-th due time after ``anchor`` (``k = 0`` is the anchor itself)."""
    if frequency in _DAYS:
        return anchor + timedelta(days=_DAYS[frequency] * k)
    if frequency in _MONTHS:
        return add_months(anchor, _MONTHS[frequency] * k)
    raise ValueError(f"unknown frequency {frequency!r}")


def next_due(anchor: datetime, frequency: str, after: datetime) -> datetime:
    """The first boundary of ``anchor``'s grid strictly later than ``after``."""
    if after < anchor:
        return anchor
    if frequency in _DAYS:
        step = timedelta(days=_DAYS[frequency])
        k = (after - anchor) // step + 1
        return anchor + step * k
    step_months = _MONTHS[frequency]
    months_apart = (after.year - anchor.year) * 12 + (after.month - anchor.month)
    k = max(0, months_apart // step_months - 1)
    candidate = boundary(anchor, frequency, k)
    while candidate <= after:
        k += 1
        candidate = boundary(anchor, frequency, k)
    return candidate


def due_after_run(anchor: datetime, frequency: str, scheduled: datetime, now: datetime) -> datetime:
    """The next due time after a recurring request for the boundary ``scheduled`` (RT-10): the
    next boundary of the grid, never counted from when the provider finished. A request that ran
    late (a backlog, a retry) does not create a burst of catch-up runs: boundaries already past
    ``now`` are skipped."""
    return next_due(anchor, frequency, max(scheduled, now))


def first_due(anchor: datetime, frequency: str) -> datetime:
    """The due time after a (re-)anchoring: creation, a manual run or a frequency change."""
    return boundary(anchor, frequency, 1)
