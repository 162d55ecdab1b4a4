"""Measured results: the latest per keyword and device, and one keyword's position over time."""

from __future__ import annotations

from sqlalchemy import func, or_, select

from app.db.session import ReadSession
from app.db.tenancy import scoped_exists
from app.engines.ranktracking.models import (
    CANCELLED,
    TERMINAL_RUN_STATUSES,
    Result,
    Run,
    Schedule,
)
from app.engines.ranktracking.schemas import HistoryPoint, KeywordHistoryOut, ResultOut

HISTORY_POINTS = 200


def result_out(row: Result) -> ResultOut:
    return ResultOut(
        run_id=row.run_id,
        keyword=row.keyword,
        device=row.device,
        state=row.state,
        position=row.position,
        url=row.url,
        features=list(row.features or []),
        data=row.data,
        fetched_at=row.fetched_at,
    )


async def run_results(session: ReadSession, run_id: int) -> list[ResultOut]:
    rows = await session.execute(
        select(Result).where(Result.run_id == run_id).order_by(Result.keyword)
    )
    return [result_out(r) for r in rows.scalars()]


async def latest_results(session: ReadSession, schedule_id: int) -> list[ResultOut]:
    """Each device's last terminal child run that returned results, keyword by keyword.

    A run still active, one that returned nothing, and one cancelled by a pause or an end are
    passed over, so that "latest results" keeps showing the last measurement that exists instead
    of a column of pending or missing keywords."""
    chosen: dict[str | None, int] = {}
    rows = await session.execute(
        select(Run.device, func.max(Run.id))
        .where(
            Run.schedule_id == schedule_id,
            Run.status.in_(TERMINAL_RUN_STATUSES),
            Run.retrieved + Run.no_data > 0,
            or_(Run.error_code.is_(None), Run.error_code != CANCELLED),
        )
        .group_by(Run.device)
    )
    for device, run_id in rows.all():
        chosen[device] = int(run_id)
    out: list[ResultOut] = []
    for run_id in sorted(chosen.values()):
        out += await run_results(session, run_id)
    return sorted(out, key=lambda r: (r.keyword, r.device or ""))


async def keyword_history(
    session: ReadSession, schedule_id: int, keyword: str
) -> KeywordHistoryOut:
    rows = await session.execute(
        select(Result)
        .where(Result.schedule_id == schedule_id, Result.keyword == keyword)
        .order_by(Result.id.desc())
        .limit(HISTORY_POINTS)
    )
    points = [
        HistoryPoint(
            run_id=r.run_id,
            device=r.device,
            state=r.state,
            position=r.position,
            fetched_at=r.fetched_at,
        )
        for r in rows.scalars()
    ]
    return KeywordHistoryOut(keyword=keyword, points=list(reversed(points)))


async def has_measured(session: ReadSession, workspace_id: int) -> bool:
    """Whether a run of one of the workspace's schedules has succeeded."""
    query = select(
        scoped_exists(
            Schedule, workspace_id, Run.schedule_id == Schedule.id, Run.status == "succeeded"
        )
    )
    return bool(await session.scalar(query))
