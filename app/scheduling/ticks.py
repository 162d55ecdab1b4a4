"""The claim of one sweep's tick, on the shared claim primitive.

Each sweep has one row in ``sweeper_state``. A tick is claimed with one conditional ``UPDATE`` of
that row: it succeeds only when no other claim is still leased *and* the tick is newer than the
last one claimed — or is that same tick, claimed by a runner that died before finishing it
(``finished_tick_at`` behind ``last_tick_at``, lease expired). So a tick runs once across all
processes and never overlaps the previous one; the lease is short and renewed while the tick runs,
so a killed process holds a sweep for seconds, not minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Integer, String, select, update
from sqlalchemy.types import TypeEngine

from app.db.dialect import insert_ignoring, row_count
from app.db.types import UTCDateTime
from app.scheduling.claim import Claim
from app.scheduling.models import SweeperState

if TYPE_CHECKING:
    from app.db.session import Database

# Free, expired, or this owner's own (a tick whose end it could not record).
_FREE = "(lease_until IS NULL OR lease_until < :now OR lease_owner = :owner)"
_NEWER = "(last_tick_at IS NULL OR last_tick_at < :tick)"
# The same tick again: its runner claimed it and never recorded its end.
_ABANDONED = (
    "(last_tick_at = :tick AND (finished_tick_at IS NULL OR finished_tick_at < last_tick_at))"
)

_SETS = {"last_tick_at": ":tick", "last_started_at": ":now", "last_lag_ms": ":lag_ms"}
_PARAMS: dict[str, TypeEngine[Any]] = {"name": String(), "tick": UTCDateTime(), "lag_ms": Integer()}

ON_TIME = Claim(
    table=SweeperState.__table__,  # type: ignore[arg-type]
    key="name",
    due=f"name = :name AND {_FREE} AND ({_NEWER} OR {_ABANDONED})",
    order_by="name",
    returning=("name",),
    owner="lease_owner",
    expires="lease_until",
    sets=_SETS,
    params=_PARAMS,
    held="last_tick_at = :tick",
)
"""A process woke up for this tick."""

CATCH_UP = Claim(
    table=SweeperState.__table__,  # type: ignore[arg-type]
    key="name",
    # Only a sweep that has ticked before has missed anything: a new sweep starts at its next tick.
    due=f"name = :name AND {_FREE} AND last_tick_at IS NOT NULL AND ({_NEWER} OR {_ABANDONED})",
    order_by="name",
    returning=("name",),
    owner="lease_owner",
    expires="lease_until",
    sets=_SETS,
    params=_PARAMS,
    held="last_tick_at = :tick",
)
"""A process runs the latest tick it finds missed: nobody ran it, or its runner died."""


async def claim_tick(
    db: Database,
    name: str,
    tick: datetime,
    owner: str,
    now: datetime,
    lease_seconds: float,
    *,
    catch_up: bool = False,
) -> bool:
    """Claim ``tick`` of sweep ``name`` for ``owner``; True when this caller runs it."""
    async with db.write() as uow:
        await uow.session.execute(
            insert_ignoring(db, SweeperState, ["name"]),
            [{"name": name, "ticks": 0, "failures": 0}],
        )
        rows = await (CATCH_UP if catch_up else ON_TIME).take_in(
            uow.session,
            now=now,
            limit=1,
            owner=owner,
            lease_seconds=lease_seconds,
            name=name,
            tick=tick,
            lag_ms=int((now - tick).total_seconds() * 1000),
        )
        return bool(rows)


async def renew_tick(
    db: Database, name: str, tick: datetime, owner: str, now: datetime, lease_seconds: float
) -> bool:
    """Extend the claim of a running tick; False when this owner no longer holds it."""
    kept = await ON_TIME.renew(
        db, [name], owner=owner, now=now, lease_seconds=lease_seconds, tick=tick
    )
    return name in kept


@dataclass(frozen=True, slots=True)
class TickOutcome:
    duration_ms: int
    error: str | None
    lag_ms: int | None = None
    """Replaces the start lag when the tick reported the oldest due item it saw."""


async def finish_tick(
    db: Database, name: str, tick: datetime, owner: str, now: datetime, outcome: TickOutcome
) -> bool:
    """Record how the tick went and release its claim; False when the claim was lost meanwhile."""
    values: dict[str, Any] = {
        "lease_until": None,
        "finished_tick_at": tick,
        "last_finished_at": now,
        "last_duration_ms": outcome.duration_ms,
        "last_error": outcome.error,
        "ticks": SweeperState.ticks + 1,
        "failures": SweeperState.failures + (1 if outcome.error else 0),
    }
    if outcome.error is None:
        values["last_succeeded_at"] = now
    if outcome.lag_ms is not None:
        values["last_lag_ms"] = outcome.lag_ms
    async with db.write() as uow:
        result = await uow.session.execute(
            update(SweeperState)
            .where(
                SweeperState.name == name,
                SweeperState.lease_owner == owner,
                SweeperState.last_tick_at == tick,
            )
            .values(**values)
        )
        return row_count(result) > 0


async def lease_holder(db: Database, name: str) -> tuple[str | None, datetime | None]:
    """Who holds sweep ``name`` and until when (``None``s when free)."""
    async with db.read() as session:
        row = (
            await session.execute(
                select(SweeperState.lease_owner, SweeperState.lease_until).where(
                    SweeperState.name == name
                )
            )
        ).first()
    if row is None:
        return None, None
    return row[0], row[1]


async def sweeper_states(db: Database) -> list[SweeperState]:
    async with db.read() as session:
        return list(
            (await session.execute(select(SweeperState).order_by(SweeperState.name))).scalars()
        )
