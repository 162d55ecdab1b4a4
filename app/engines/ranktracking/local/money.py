"""A geo-grid scan's money, on the engine's ledger (RT-123).

A scan is estimated at the provider's price of one Maps or Local Finder SERP per cell, held
from the organisation's balance as one reservation entry (the same ``rt_ledger`` and
``rt_balances`` rows a run uses, so the balance, its history and the ledger page show it), and
settled once its cells are read: charged for every task the provider created (it bills a task
when it is created, whatever the page holds), the rest released. The reservation resolves once:
``reservation_state`` leaves ``held`` with a conditional ``UPDATE`` and the ledger's unique
``(reservation_id, kind)`` refuses a second settlement or release.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import update

from app.db.dialect import row_count
from app.db.session import WriteSession
from app.engines.ranktracking.amounts import exact_eur
from app.engines.ranktracking.ledger import lock_balance
from app.engines.ranktracking.local.models import SCAN_RESERVATIONS, GeoGrid
from app.engines.ranktracking.models import (
    RECONCILIATION,
    RELEASE,
    RES_HELD,
    RES_RELEASED,
    RES_SETTLED,
    RESERVATION,
    SETTLEMENT,
    Balance,
    LedgerEntry,
)
from app.errors import DomainError


class BalanceTooLow(DomainError):
    """The organisation's available balance does not cover the scan's estimate."""

    status = 402
    code = "insufficient_balance"


async def reserve_scan(
    session: WriteSession, scan: GeoGrid, amount_micros: int, now: datetime
) -> None:
    """Hold ``amount_micros`` for the (flushed) ``scan`` or raise :class:`BalanceTooLow`; the
    balance row stays locked until the caller's transaction ends."""
    balance = await lock_balance(session, scan.organisation_id, now)
    if balance.available_micros < amount_micros:
        raise BalanceTooLow(
            f"this scan is estimated at {exact_eur(amount_micros)} EUR and the balance has "
            f"{exact_eur(max(0, balance.available_micros))} EUR available; top up first",
            details=[
                {
                    "field": "size",
                    "message": "a smaller grid costs less",
                    "code": "insufficient_balance",
                    "estimate_micros": amount_micros,
                    "available_micros": balance.available_micros,
                }
            ],
        )
    entry = _entry(scan, RESERVATION, amount_micros, f"geo-grid {scan.id}", now)
    session.add(entry)
    await session.flush()
    scan.reserved_micros = amount_micros
    SCAN_RESERVATIONS.move(scan, RES_HELD)
    scan.reservation_entry_id = entry.id
    await session.execute(
        update(Balance)
        .where(Balance.organisation_id == scan.organisation_id)
        .values(reserved_micros=Balance.reserved_micros + amount_micros, updated_at=now)
    )


@dataclass(frozen=True, slots=True)
class ScanSettlement:
    charged_micros: int
    provider_micros: int
    gap_micros: int
    """How much the provider billed above the charge (a reconciliation entry, never charged)."""


async def settle_scan(
    session: WriteSession,
    scan: GeoGrid,
    *,
    charge_micros: int,
    provider_cost: Decimal,
    provider_micros: int,
    billed: int,
    now: datetime,
) -> ScanSettlement | None:
    """Charge at most the reservation, release the rest; None when already resolved."""
    charge = max(0, min(charge_micros, scan.reserved_micros))
    if not await _leave_held(session, scan, RES_SETTLED, charge):
        return None
    note = f"geo-grid {scan.id}: {billed} searches billed"
    session.add(_entry(scan, SETTLEMENT, charge, note, now, cost=provider_cost))
    rest = scan.reserved_micros - charge
    if rest > 0:
        note = f"geo-grid {scan.id}: unused part of the reservation"
        session.add(_entry(scan, RELEASE, rest, note, now))
    gap = max(0, provider_micros - charge)
    if gap > 0:
        note = (
            f"geo-grid {scan.id}: provider billed {provider_cost} USD "
            f"({exact_eur(provider_micros)} EUR), charged {exact_eur(charge)} EUR"
        )
        session.add(_entry(scan, RECONCILIATION, gap, note, now, cost=provider_cost))
    await session.execute(
        update(Balance)
        .where(Balance.organisation_id == scan.organisation_id)
        .values(
            reserved_micros=Balance.reserved_micros - scan.reserved_micros,
            settled_micros=Balance.settled_micros + charge,
            updated_at=now,
        )
    )
    await session.flush()
    return ScanSettlement(charge, provider_micros, gap)


async def release_scan(session: WriteSession, scan: GeoGrid, now: datetime, note: str) -> bool:
    """Give the whole reservation back (nothing was posted). Idempotent."""
    if not await _leave_held(session, scan, RES_RELEASED, None):
        return False
    session.add(_entry(scan, RELEASE, scan.reserved_micros, f"geo-grid {scan.id}: {note}", now))
    await session.execute(
        update(Balance)
        .where(Balance.organisation_id == scan.organisation_id)
        .values(reserved_micros=Balance.reserved_micros - scan.reserved_micros, updated_at=now)
    )
    await session.flush()
    return True


async def _leave_held(
    session: WriteSession, scan: GeoGrid, new_state: str, settled: int | None
) -> bool:
    result = await session.execute(
        SCAN_RESERVATIONS.transition(
            update(GeoGrid).where(GeoGrid.id == scan.id), new_state, from_=(RES_HELD,)
        )
        .values(settled_micros=settled)
        .execution_options(synchronize_session=False)
    )
    if not row_count(result):
        return False
    SCAN_RESERVATIONS.move(scan, new_state)
    scan.settled_micros = settled
    return True


def _entry(
    scan: GeoGrid,
    kind: str,
    amount_micros: int,
    note: str,
    now: datetime,
    *,
    cost: Decimal | None = None,
) -> LedgerEntry:
    return LedgerEntry(
        organisation_id=scan.organisation_id,
        workspace_id=scan.workspace_id,
        schedule_id=None,
        run_id=None,
        reservation_id=None if kind == RESERVATION else scan.reservation_entry_id,
        kind=kind,
        amount_micros=amount_micros,
        provider_cost=cost,
        note=note[:300],
        created_at=now,
    )
