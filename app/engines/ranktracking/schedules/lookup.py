"""Finding schedules, always within one workspace: another workspace's id answers "not found"."""

from __future__ import annotations

from sqlalchemy import func, select

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_exists, scoped_select
from app.engines.ranktracking.errors import ScheduleNotFound
from app.engines.ranktracking.models import ACTIVE, ARCHIVED, PAUSED_BALANCE, PAUSED_USER, Schedule

LIVE_STATUSES = (ACTIVE, PAUSED_USER, PAUSED_BALANCE)
"""The schedules that count against the workspace's limit (RT-2): every one not ended."""


async def get_schedule(session: ReadSession, workspace_id: int, schedule_id: int) -> Schedule:
    found = await session.scalar(
        scoped_select(Schedule, workspace_id).where(Schedule.id == schedule_id)
    )
    if found is None:
        raise ScheduleNotFound("schedule not found")
    return found


async def lock_schedule(session: WriteSession, workspace_id: int, schedule_id: int) -> Schedule:
    found = (
        await session.execute(
            scoped_select(Schedule, workspace_id)
            .where(Schedule.id == schedule_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if found is None:
        raise ScheduleNotFound("schedule not found")
    return found


async def list_schedules(
    session: ReadSession, workspace_id: int, *, include_archived: bool = False
) -> list[Schedule]:
    stmt = scoped_select(Schedule, workspace_id)
    if not include_archived:
        stmt = stmt.where(Schedule.status != ARCHIVED)
    return list((await session.execute(stmt.order_by(Schedule.id))).scalars())


async def live_count(session: ReadSession, workspace_id: int) -> int:
    return int(
        await session.scalar(
            scoped_select(Schedule, workspace_id, func.count())
            .select_from(Schedule)
            .where(Schedule.status.in_(LIVE_STATUSES))
        )
        or 0
    )


async def has_schedule(session: ReadSession, workspace_id: int) -> bool:
    """Whether the workspace has created a schedule."""
    return bool(await session.scalar(select(scoped_exists(Schedule, workspace_id))))
