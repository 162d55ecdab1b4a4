"""Measured results: the latest per keyword and device, and one keyword's position over time."""

from __future__ import annotations

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.ranktracking.models import Result, Run
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
    """Each device's most recent measured child run, keyword by keyword."""
    latest_runs = (
        await session.execute(
            select(Run.device, Run.id)
            .where(Run.schedule_id == schedule_id, Run.started_at.is_not(None))
            .order_by(Run.id.desc())
            .limit(20)
        )
    ).all()
    chosen: dict[str | None, int] = {}
    for device, run_id in latest_runs:
        chosen.setdefault(device, run_id)
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
