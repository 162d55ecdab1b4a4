"""The append-only money ledger and the balance derived from it (RT-20 to RT-24, RT-37, RT-38).

Entries are only ever inserted: top-ups, reservations, settlements, releases and reconciliation
entries (a provider cost above the charge, recorded but not charged), each carrying the run or
top-up it belongs to. Amounts are integer micro-euros (:mod:`.amounts`). The ``rt_balances`` row is the same information summed up, updated in
the same transaction as each entry; admissions lock it (``FOR UPDATE`` on PostgreSQL; SQLite write
transactions are already serialised by ``BEGIN IMMEDIATE``) and a check constraint keeps it from ever
going negative. :func:`ledger_available` recomputes the balance from the entries alone.

A reservation resolves once: the run's ``reservation_state`` moves from ``held`` with a conditional
``UPDATE`` (the loser of a race changes nothing), and the unique ``(reservation_id, kind)`` index
refuses a second settlement or release even if that guard were bypassed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Table, bindparam, case, func, insert, select, union_all, update
from sqlalchemy.orm.attributes import set_committed_value

from app.db import keyset
from app.db.dialect import insert_ignoring, row_count
from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking.amounts import exact_eur
from app.engines.ranktracking.models import (
    RECONCILIATION,
    RELEASE,
    RES_HELD,
    RES_RELEASED,
    RES_SETTLED,
    RESERVATION,
    RESERVATIONS,
    SETTLEMENT,
    TOPUP,
    Balance,
    LedgerEntry,
    Run,
)


def month_start(now: datetime) -> datetime:
    """Start of the UTC calendar month containing ``now`` (RT-21)."""
    now = now.astimezone(UTC)
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


async def ensure_balance(session: WriteSession, organisation_id: int, now: datetime) -> None:
    """Create the organisation's balance row if it does not exist yet (idempotent)."""
    await session.execute(
        insert_ignoring(session, Balance, ["organisation_id"]).values(
            organisation_id=organisation_id,
            credits_micros=0,
            settled_micros=0,
            reserved_micros=0,
            updated_at=now,
        )
    )


async def lock_balance(session: WriteSession, organisation_id: int, now: datetime) -> Balance:
    """The balance row, locked until the transaction ends (created on first use)."""
    return (await lock_balances(session, [organisation_id], now))[organisation_id]


async def lock_balances(
    session: WriteSession, organisation_ids: list[int], now: datetime
) -> dict[int, Balance]:
    """The balance rows of several organisations, locked in organisation order (so that two
    transactions locking overlapping sets wait for each other instead of deadlocking)."""
    wanted = sorted(set(organisation_ids))
    if not wanted:
        return {}
    stmt = (
        select(Balance)
        .where(Balance.organisation_id.in_(wanted))
        .order_by(Balance.organisation_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    found = {b.organisation_id: b for b in (await session.execute(stmt)).scalars()}
    missing = [org for org in wanted if org not in found]
    if missing:
        for org in missing:
            await ensure_balance(session, org, now)
        found = {b.organisation_id: b for b in (await session.execute(stmt)).scalars()}
    return found


@dataclass(frozen=True, slots=True)
class BalanceView:
    credits_micros: int
    settled_micros: int
    reserved_micros: int

    @property
    def available_micros(self) -> int:
        return self.credits_micros - self.settled_micros - self.reserved_micros


async def balance_of(session: ReadSession, organisation_id: int) -> BalanceView:
    row = await session.get(Balance, organisation_id, populate_existing=True)
    if row is None:
        return BalanceView(0, 0, 0)
    return BalanceView(row.credits_micros, row.settled_micros, row.reserved_micros)


async def ledger_available(session: ReadSession, organisation_id: int) -> int:
    """Available balance recomputed from the entries alone: credits − settled − active
    reservations, which equals top-ups − reservations + releases."""
    signed = case(
        (LedgerEntry.kind == TOPUP, LedgerEntry.amount_micros),
        (LedgerEntry.kind == RESERVATION, -LedgerEntry.amount_micros),
        (LedgerEntry.kind == RELEASE, LedgerEntry.amount_micros),
        else_=0,
    )
    total = await session.scalar(
        select(func.coalesce(func.sum(signed), 0)).where(
            LedgerEntry.organisation_id == organisation_id
        )
    )
    return int(total or 0)


async def top_up(
    session: WriteSession,
    *,
    organisation_id: int,
    amount_micros: int,
    now: datetime,
    workspace_id: int | None = None,
    note: str = "",
) -> LedgerEntry:
    """Add credits. Adding balance never reactivates a paused schedule by itself (RT-23)."""
    if amount_micros <= 0:
        raise ValueError("a top-up must be positive")
    await ensure_balance(session, organisation_id, now)
    entry = LedgerEntry(
        organisation_id=organisation_id,
        workspace_id=workspace_id,
        kind=TOPUP,
        amount_micros=amount_micros,
        note=note[:300],
        created_at=now,
    )
    session.add(entry)
    await session.execute(
        update(Balance)
        .where(Balance.organisation_id == organisation_id)
        .values(credits_micros=Balance.credits_micros + amount_micros, updated_at=now)
    )
    await session.flush()
    return entry


async def schedule_month_spend(session: ReadSession, schedule_id: int, now: datetime) -> int:
    """RT-21: this schedule's settled costs since the UTC month start plus its still-held
    reservations (manual, recurring, standard, priority and every device alike)."""
    settled = (
        select(func.coalesce(func.sum(LedgerEntry.amount_micros), 0))
        .where(
            LedgerEntry.schedule_id == schedule_id,
            LedgerEntry.kind == SETTLEMENT,
            LedgerEntry.created_at >= month_start(now),
        )
        .scalar_subquery()
    )
    held = (
        select(func.coalesce(func.sum(Run.reserved_micros), 0))
        .where(Run.schedule_id == schedule_id, Run.reservation_state == RES_HELD)
        .scalar_subquery()
    )
    # One round trip: admission runs this for every capped schedule of every sweep.
    return int(await session.scalar(select(settled + held)) or 0)


async def month_spend_of(
    session: ReadSession, schedule_ids: list[int], now: datetime
) -> dict[int, int]:
    """:func:`schedule_month_spend` of several schedules in one round trip."""
    if not schedule_ids:
        return {}
    settled = (
        select(LedgerEntry.schedule_id, func.sum(LedgerEntry.amount_micros))
        .where(
            LedgerEntry.schedule_id.in_(schedule_ids),
            LedgerEntry.kind == SETTLEMENT,
            LedgerEntry.created_at >= month_start(now),
        )
        .group_by(LedgerEntry.schedule_id)
    )
    held = (
        select(Run.schedule_id, func.sum(Run.reserved_micros))
        .where(Run.schedule_id.in_(schedule_ids), Run.reservation_state == RES_HELD)
        .group_by(Run.schedule_id)
    )
    spent = dict.fromkeys(schedule_ids, 0)
    rows: list[Any] = list((await session.execute(union_all(settled, held))).all())
    for schedule_id, cents in rows:
        spent[int(schedule_id)] += int(cents or 0)
    return spent


@dataclass(frozen=True, slots=True)
class Hold:
    """One reservation to write: ``amount_micros`` held for ``run``."""

    run: Run
    organisation_id: int
    amount_micros: int


async def reserve_many(
    session: WriteSession, balances: dict[int, Balance], holds: list[Hold], now: datetime
) -> None:
    """Write reservations the caller has checked against the locked ``balances`` (admission
    decides the whole group in memory first): one entry per hold, one balance update per
    organisation. The check constraint still refuses anything that would overdraw."""
    if not holds:
        return
    per_org: dict[int, int] = {}
    entries: list[dict[str, Any]] = []
    for hold in holds:
        run = hold.run
        entries.append(
            {
                "organisation_id": hold.organisation_id,
                "workspace_id": run.workspace_id,
                "schedule_id": run.schedule_id,
                "run_id": run.id,
                "reservation_id": None,
                "kind": RESERVATION,
                "amount_micros": hold.amount_micros,
                "provider_cost": None,
                "note": f"run {run.id} {run.device or run.data_type}",
                "created_at": now,
            }
        )
        # Admission writes runs with their reservation already set; only a run reserved after
        # its insert changes here (and is written by the next flush).
        if run.reserved_micros != hold.amount_micros or run.reservation_state != RES_HELD:
            run.reserved_micros = hold.amount_micros
            RESERVATIONS.move(run, RES_HELD)
        per_org[hold.organisation_id] = per_org.get(hold.organisation_id, 0) + hold.amount_micros
    await session.execute(insert(LedgerEntry), entries)
    # Core (not ORM) executemany: one prepared statement for every organisation of the batch.
    table = cast(Table, Balance.__table__)
    await session.execute(
        update(table)
        .where(table.c.organisation_id == bindparam("org"))
        .values(reserved_micros=table.c.reserved_micros + bindparam("amount"), updated_at=now),
        [{"org": org, "amount": amount} for org, amount in sorted(per_org.items())],
    )
    for org, amount in per_org.items():
        balance = balances[org]
        # Keep the locked row's in-memory copy current without marking it dirty (the UPDATE
        # above is the write; a later flush must not write a stale copy back).
        set_committed_value(balance, "reserved_micros", balance.reserved_micros + amount)


async def reserve(
    session: WriteSession,
    balance: Balance,
    run: Run,
    *,
    organisation_id: int,
    amount_micros: int,
    now: datetime,
) -> bool:
    """Hold ``amount_micros`` for ``run`` against the locked ``balance``; False when short."""
    if balance.available_micros < amount_micros:
        return False
    hold = Hold(run=run, organisation_id=organisation_id, amount_micros=amount_micros)
    await reserve_many(session, {organisation_id: balance}, [hold], now)
    return True


async def _reservation_entry(session: WriteSession, run_id: int) -> LedgerEntry | None:
    return await session.scalar(
        select(LedgerEntry).where(LedgerEntry.run_id == run_id, LedgerEntry.kind == RESERVATION)
    )


@dataclass(frozen=True, slots=True)
class _Resolving:
    """The entries that resolve one run's reservation (its settlement, releases, a
    reconciliation): each names the run, its schedule and workspace, and the reservation."""

    run: Run
    organisation_id: int
    reservation_id: int | None
    now: datetime

    @classmethod
    async def of(
        cls, session: WriteSession, run: Run, *, organisation_id: int, now: datetime
    ) -> _Resolving:
        reservation = await _reservation_entry(session, run.id)
        return cls(run, organisation_id, reservation.id if reservation is not None else None, now)

    def entry(
        self, kind: str, amount_micros: int, note: str, *, cost: Decimal | None = None
    ) -> LedgerEntry:
        return LedgerEntry(
            organisation_id=self.organisation_id,
            workspace_id=self.run.workspace_id,
            schedule_id=self.run.schedule_id,
            run_id=self.run.id,
            reservation_id=self.reservation_id,
            kind=kind,
            amount_micros=amount_micros,
            provider_cost=cost,
            note=note[:300],
            created_at=self.now,
        )


async def _claim(session: WriteSession, run: Run, new_state: str, settled: int | None) -> bool:
    """Move the run's reservation out of ``held``; True for the one caller that did."""
    result = await session.execute(
        RESERVATIONS.transition(update(Run).where(Run.id == run.id), new_state, from_=(RES_HELD,))
        .values(settled_micros=settled)
        .execution_options(synchronize_session=False)
    )
    claimed = bool(row_count(result))
    if claimed:
        RESERVATIONS.move(run, new_state)
        run.settled_micros = settled
    return claimed


@dataclass(frozen=True, slots=True)
class Settlement:
    """What :func:`settle` wrote: the charge, and the gap to what the provider billed."""

    charged_micros: int
    provider_micros: int | None
    """The provider's reported cost converted to EUR (None when it reported none)."""
    gap_micros: int
    """How much the provider billed above the charge (0 when it did not); recorded as a
    reconciliation entry, never charged."""
    above_reservation: bool
    """The provider billed more than the whole reservation."""


async def settle(
    session: WriteSession,
    run: Run,
    *,
    organisation_id: int,
    charge_micros: int,
    now: datetime,
    provider_cost: Decimal | None = None,
    provider_micros: int | None = None,
) -> Settlement | None:
    """Charge at most the reservation and release the rest (RT-24, RT-37).

    ``provider_cost`` is what the provider reported (USD), ``provider_micros`` the same in EUR.
    A provider cost above the charge is written as a reconciliation entry beside the settlement:
    the settlement itself never exceeds the reservation, so the balance cannot go negative.

    Returns what was written, or None when the reservation was already resolved (idempotent).
    """
    charge = max(0, min(charge_micros, run.reserved_micros))
    if not await _claim(session, run, RES_SETTLED, charge):
        return None
    resolving = await _Resolving.of(session, run, organisation_id=organisation_id, now=now)
    session.add(
        resolving.entry(
            SETTLEMENT, charge, f"run {run.id}: {run.retrieved} measured", cost=provider_cost
        )
    )
    rest = run.reserved_micros - charge
    if rest > 0:
        session.add(resolving.entry(RELEASE, rest, f"run {run.id}: unused part of the reservation"))
    gap = max(0, (provider_micros or 0) - charge)
    above = provider_micros is not None and provider_micros > run.reserved_micros
    if gap > 0:
        note = (
            f"run {run.id}: provider billed {provider_cost} USD "
            f"({exact_eur(provider_micros or 0)} EUR), charged {exact_eur(charge)} EUR"
            + (f", above the reservation of {exact_eur(run.reserved_micros)}" if above else "")
        )
        session.add(resolving.entry(RECONCILIATION, gap, note, cost=provider_cost))
    await session.execute(
        update(Balance)
        .where(Balance.organisation_id == organisation_id)
        .values(
            reserved_micros=Balance.reserved_micros - run.reserved_micros,
            settled_micros=Balance.settled_micros + charge,
            updated_at=now,
        )
    )
    await session.flush()
    return Settlement(
        charged_micros=charge,
        provider_micros=provider_micros,
        gap_micros=gap,
        above_reservation=above,
    )


@dataclass(frozen=True, slots=True)
class GapTotal:
    entries: int
    micros: int


async def reconciliation_total(session: ReadSession, organisation_id: int) -> GapTotal:
    """How many reconciliation entries the organisation has and the gap they add up to."""
    row = (
        await session.execute(
            select(func.count(), func.coalesce(func.sum(LedgerEntry.amount_micros), 0)).where(
                LedgerEntry.organisation_id == organisation_id,
                LedgerEntry.kind == RECONCILIATION,
            )
        )
    ).one()
    return GapTotal(entries=int(row[0] or 0), micros=int(row[1] or 0))


async def release(
    session: WriteSession, run: Run, *, organisation_id: int, now: datetime, note: str
) -> bool:
    """Give the whole reservation back (cancelled, skipped or never dispatched). Idempotent."""
    if not await _claim(session, run, RES_RELEASED, None):
        return False
    resolving = await _Resolving.of(session, run, organisation_id=organisation_id, now=now)
    session.add(resolving.entry(RELEASE, run.reserved_micros, note))
    await session.execute(
        update(Balance)
        .where(Balance.organisation_id == organisation_id)
        .values(reserved_micros=Balance.reserved_micros - run.reserved_micros, updated_at=now)
    )
    await session.flush()
    return True


async def entries(
    session: ReadSession, organisation_id: int, *, limit: int, before_id: int | None = None
) -> list[LedgerEntry]:
    stmt = select(LedgerEntry).where(LedgerEntry.organisation_id == organisation_id)
    if before_id is not None:
        stmt = stmt.where(keyset.before(LedgerEntry.id, before_id))
    rows = await session.execute(stmt.order_by(LedgerEntry.id.desc()).limit(limit))
    return list(rows.scalars())
