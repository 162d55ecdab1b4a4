"""Refusing a second live schedule that measures the same thing (RT-15): same list, data type,
frequency, devices, location and language. An ended schedule no longer blocks (RT-29)."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.ranktracking.errors import DuplicateSchedule
from app.engines.ranktracking.models import ARCHIVED, Schedule


async def refuse_duplicate(
    session: ReadSession, workspace_id: int, key: str | None, but: int | None
) -> None:
    """Refuse ``key`` when a live schedule other than ``but`` has it, naming that schedule. Two
    requests at once can both pass this check; the unique index behind
    :func:`flush_refusing_duplicates` refuses the second."""
    if key is None:
        return
    stmt = scoped_select(Schedule, workspace_id, Schedule.id, Schedule.name).where(
        Schedule.dedup_key == key, Schedule.status != ARCHIVED
    )
    if but is not None:
        stmt = stmt.where(Schedule.id != but)
    row = (await session.execute(stmt)).first()
    if row is not None:
        raise DuplicateSchedule(
            f'schedule {row[0]} ("{row[1]}") already measures this list with the same data type, '
            "frequency, devices, location and language; edit it or end it first",
            details=[{"field": "list_id", "schedule_id": row[0], "code": "duplicate_schedule"}],
        )


async def flush_refusing_duplicates(session: WriteSession) -> None:
    """Write pending changes; the partial unique index on live schedules' duplicate key (RT-15)
    turns a clash into :class:`DuplicateSchedule`, leaving the transaction usable."""
    try:
        async with session.begin_nested():
            await session.flush()
    except IntegrityError as exc:
        raise DuplicateSchedule("a live schedule with the same duplicate key exists") from exc
