"""Read shapes of the organisation balance, its ledger and the activity feed, plus top-ups."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking import ledger
from app.engines.ranktracking.amounts import cents_to_micros, eur_down
from app.engines.ranktracking.models import Activity, LedgerEntry
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.schemas import (
    ActivityOut,
    ActivityPage,
    BalanceOut,
    LedgerEntryOut,
    LedgerPage,
)
from app.errors import ValidationFailed
from app.pagination import cursor_number

PAGE = 50
MAX_TOP_UP_EUR = Decimal(1_000_000)


def eur(cents: int) -> str:
    """Whole cents as EUR (the monthly estimate, the cap, a top-up)."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


async def balance_out(session: ReadSession, organisation_id: int) -> BalanceOut:
    view = await ledger.balance_of(session, organisation_id)
    gaps = await ledger.reconciliation_total(session, organisation_id)
    return BalanceOut(
        credits_micros=view.credits_micros,
        settled_micros=view.settled_micros,
        reserved_micros=view.reserved_micros,
        available_micros=view.available_micros,
        available_eur=eur_down(view.available_micros),
        reconciliation_entries=gaps.entries,
        reconciliation_micros=gaps.micros,
    )


async def top_up(
    session: WriteSession,
    *,
    organisation_id: int,
    workspace_id: int,
    amount_eur: Decimal,
    note: str,
    now: datetime,
) -> None:
    if not amount_eur.is_finite() or amount_eur <= 0 or amount_eur > MAX_TOP_UP_EUR:
        raise ValidationFailed.field("amount_eur", "must be more than 0 and at most 1000000 EUR")
    cents = amount_eur * 100
    if cents != cents.to_integral_value():
        raise ValidationFailed.field("amount_eur", "must be a whole number of cents")
    await ledger.top_up(
        session,
        organisation_id=organisation_id,
        workspace_id=workspace_id,
        amount_micros=cents_to_micros(int(cents)),
        now=now,
        note=note or "top-up",
    )
    activity.record(
        session,
        workspace_id=workspace_id,
        kind=activity.TOPUP,
        message=f"balance topped up by {eur(int(cents))} EUR"
        + " (paused schedules stay paused until resumed)",
        now=now,
    )


def entry_out(e: LedgerEntry) -> LedgerEntryOut:
    return LedgerEntryOut(
        id=e.id,
        kind=e.kind,
        amount_micros=e.amount_micros,
        schedule_id=e.schedule_id,
        run_id=e.run_id,
        reservation_id=e.reservation_id,
        provider_cost=str(e.provider_cost) if e.provider_cost is not None else None,
        note=e.note,
        created_at=e.created_at,
    )


async def ledger_page(
    session: ReadSession, organisation_id: int, cursor: str | None, limit: int = PAGE
) -> LedgerPage:
    rows = await ledger.entries(
        session, organisation_id, limit=limit + 1, before_id=cursor_number(cursor)
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return LedgerPage(
        items=[entry_out(e) for e in rows],
        next_cursor=str(rows[-1].id) if more and rows else None,
    )


def activity_out(a: Activity) -> ActivityOut:
    return ActivityOut(
        id=a.id,
        kind=a.kind,
        code=a.code,
        message=a.message,
        schedule_id=a.schedule_id,
        run_id=a.run_id,
        created_at=a.created_at,
    )


async def activity_page(
    session: ReadSession,
    workspace_id: int,
    cursor: str | None,
    *,
    schedule_id: int | None = None,
    limit: int = PAGE,
) -> ActivityPage:
    rows = await activity.feed(
        session,
        workspace_id,
        limit=limit + 1,
        before_id=cursor_number(cursor),
        schedule_id=schedule_id,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return ActivityPage(
        items=[activity_out(a) for a in rows],
        next_cursor=str(rows[-1].id) if more and rows else None,
    )
