"""Search volume beside positions: the latest keyword data measured for the same keyword list
(or, for a schedule with a direct selection, by any keyword-data schedule of the workspace)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.db.session import ReadSession
from app.db.tenancy import scoped_select
from app.engines.ranktracking.models import RETRIEVED, Result, Schedule


async def search_volumes(session: ReadSession, schedule: Schedule) -> dict[str, int]:
    sources = scoped_select(Schedule, schedule.workspace_id, Schedule.id).where(
        Schedule.data_type == "keyword_data"
    )
    if schedule.list_id is not None:
        sources = sources.where(Schedule.list_id == schedule.list_id)
    latest = (
        select(func.max(Result.id))
        .where(Result.schedule_id.in_(sources), Result.state == RETRIEVED)
        .group_by(Result.keyword)
    )
    rows = await session.execute(select(Result.keyword, Result.data).where(Result.id.in_(latest)))
    out: dict[str, int] = {}
    for keyword, data in rows.all():
        value = (data or {}).get("search_volume")
        if isinstance(value, int):
            out[keyword] = value
    return out
