"""The schedules an admission works on, held for its transaction: claimed when the sweep
asked (only those still active and due), locked when a person did; and which of them still have
a run in flight (a schedule runs one request at a time)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, select

from app.db.session import WriteSession
from app.db.types import UTCDateTime
from app.engines.ranktracking.models import ACTIVE, ACTIVE_RUN_STATUSES, Run, Schedule
from app.engines.ranktracking.schedules.states import SCHEDULES
from app.scheduling.claim import Claim


async def lock_schedules(session: WriteSession, schedule_ids: list[int]) -> dict[int, Schedule]:
    """The schedule rows, locked in id order for the rest of the transaction (PostgreSQL; SQLite
    write transactions are serialised already). Every admission locks its schedules before any
    balance row, and both in id order, so concurrent admissions wait instead of deadlocking."""
    rows = await session.execute(
        select(Schedule)
        .where(Schedule.id.in_(schedule_ids))
        .order_by(Schedule.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return {s.id: s for s in rows.scalars()}


DUE = Claim(
    table=Schedule.__table__,  # type: ignore[arg-type]
    due=f"{SCHEDULES.where_keyed(ACTIVE, qualified=True)} AND next_due_at <= :due_by AND id IN :ids",
    order_by="next_due_at, id",
    returning=("id",),
    sets={"updated_at": ":now"},
    params={"due_by": UTCDateTime(), "ids": BigInteger()},
    lists=frozenset({"ids"}),
)
"""Of the schedules a sweep picked, those still active and due by its nominal tick. The claim
holds them for the admission's transaction, which advances their due time before it commits
(no owner column: once committed a schedule is simply no longer due). A schedule another
admission holds at that moment is skipped, not waited for: that admission moves its due time."""


async def claim_due_schedules(
    session: WriteSession, schedule_ids: list[int], *, due_by: datetime, now: datetime
) -> dict[int, Schedule]:
    """Claim the due ones of ``schedule_ids`` inside the admission's transaction."""
    if not schedule_ids:
        return {}
    claimed = await DUE.take_in(
        session, now=now, limit=len(schedule_ids), due_by=due_by, ids=list(schedule_ids)
    )
    # The claim's UPDATE holds the row locks already; this loads the rows it took.
    return await lock_schedules(session, sorted(int(row[0]) for row in claimed))


async def read_schedules(session: WriteSession, schedule_ids: list[int]) -> dict[int, Schedule]:
    if not schedule_ids:
        return {}
    rows = await session.execute(
        select(Schedule)
        .where(Schedule.id.in_(schedule_ids))
        .execution_options(populate_existing=True)
    )
    return {s.id: s for s in rows.scalars()}


async def lock_schedule(session: WriteSession, schedule_id: int) -> Schedule | None:
    """One schedule row, locked for the rest of the transaction."""
    return (await lock_schedules(session, [schedule_id])).get(schedule_id)


async def with_active_runs(session: WriteSession, schedule_ids: list[int]) -> set[int]:
    """Which of the schedules have a run still ``dispatching`` or ``running``."""
    if not schedule_ids:
        return set()
    rows = await session.execute(
        select(Run.schedule_id)
        .where(Run.schedule_id.in_(schedule_ids), Run.status.in_(ACTIVE_RUN_STATUSES))
        .distinct()
    )
    return set(rows.scalars())


async def has_active_run(session: WriteSession, schedule_id: int) -> bool:
    return schedule_id in await with_active_runs(session, [schedule_id])
