"""The organisation's available balance over time, from the ledger alone (RT-38): the running sum
of top-ups − reservations + releases (the same sum as :func:`.ledger.ledger_available`), closed at
the end of each UTC day, as chart data for the balance page."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from sqlalchemy import case, func, select

from app.db.session import ReadSession
from app.engines.ranktracking.amounts import MICROS_PER_EUR
from app.engines.ranktracking.models import RELEASE, RESERVATION, TOPUP, LedgerEntry
from app.schemas import Schema

DAYS = 90
"""Days the chart shows, today included."""

_SIGNED = case(
    (LedgerEntry.kind == TOPUP, LedgerEntry.amount_micros),
    (LedgerEntry.kind == RESERVATION, -LedgerEntry.amount_micros),
    (LedgerEntry.kind == RELEASE, LedgerEntry.amount_micros),
    else_=0,
)


class BalanceSeries(Schema):
    label: str
    values: list[float | None]
    color: str


class BalanceChart(Schema):
    """A time series of the balance page's chart."""

    x: list[int]
    """Unix seconds of each day's start (UTC), oldest first; its value is the day's closing
    balance."""
    series: list[BalanceSeries]
    y_label: str
    title: str = "Available balance"
    inverted: bool = False
    """Drawn by the position charts' helper (``static/rt_charts.js``), which gives a single day a
    span of days on its time axis rather than an automatic range of years."""


def _end_of(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)


async def balance_history(
    session: ReadSession, organisation_id: int, now: datetime, days: int = DAYS
) -> BalanceChart:
    """The available balance at the end of each day, from the first day with an entry within
    the last ``days`` days (a figure, shown in EUR; the ledger keeps the exact micro-euros)."""
    today = now.astimezone(UTC).date()
    since = _end_of(today - timedelta(days=days))
    opening = await session.scalar(
        select(func.coalesce(func.sum(_SIGNED), 0)).where(
            LedgerEntry.organisation_id == organisation_id, LedgerEntry.created_at < since
        )
    )
    rows = await session.execute(
        select(LedgerEntry.created_at, _SIGNED)
        .where(LedgerEntry.organisation_id == organisation_id, LedgerEntry.created_at >= since)
        .order_by(LedgerEntry.id)
    )
    by_day: dict[date, int] = {}
    for created_at, amount in rows.all():
        day = created_at.astimezone(UTC).date()
        by_day[day] = by_day.get(day, 0) + int(amount or 0)
    balance = int(opening or 0)
    first = min(by_day) if by_day and not balance else today - timedelta(days=days - 1)
    x: list[int] = []
    values: list[float | None] = []
    day = first
    while day <= today:
        balance += by_day.get(day, 0)
        x.append(int((_end_of(day) - timedelta(days=1)).timestamp()))
        values.append(balance / MICROS_PER_EUR)  # a figure to draw; exact in the ledger
        day += timedelta(days=1)
    return BalanceChart(
        x=x,
        series=[BalanceSeries(label="available (EUR)", values=values, color="#2453c7")],
        y_label="EUR",
    )
