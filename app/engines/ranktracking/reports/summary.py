"""Per measured run: how many keywords it measured and ranked, the average position and the
visibility score (formula in :mod:`.visibility`), aggregated in the database."""

from __future__ import annotations

from sqlalchemy import Select, case, func, select

from app.db.session import ReadSession
from app.engines.ranktracking.models import RETRIEVED, Result
from app.engines.ranktracking.reports.measurements import (
    KEYWORD_DATA,
    Column,
    measured_runs,
    run_set,
)
from app.engines.ranktracking.reports.schemas import RunSummaryOut, SummaryPage
from app.engines.ranktracking.reports.visibility import CTR_BY_POSITION
from app.engines.ranktracking.tags import checked_tag, tagged_keywords
from app.pagination import checked_limit, cursor_number

_retrieved = Result.state == RETRIEVED
_ranked = _retrieved & Result.position.is_not(None)
_ctr = case(
    *((Result.position == p, rate) for p, rate in CTR_BY_POSITION.items()),
    else_=0.0,
)


async def run_summaries(
    session: ReadSession, columns: list[Column], *, keywords: Select[str] | None = None
) -> list[RunSummaryOut]:
    """One summary per SERP child run of ``columns``, in column order then desktop before mobile;
    over the ``keywords`` the statement selects only, when given (a tag's, RT-71)."""
    where = {
        run_id: (column, device)
        for column in columns
        for device, run_id in column.runs.items()
        if device != KEYWORD_DATA
    }
    if not where:
        return []
    rows = await session.execute(
        select(
            Result.run_id,
            func.count().filter(_retrieved),
            func.count().filter(_ranked),
            func.count().filter(_ranked & (Result.position <= 3)),
            func.count().filter(_ranked & (Result.position <= 10)),
            func.avg(Result.position).filter(_ranked),
            func.sum(_ctr).filter(_retrieved),
        )
        .where(
            Result.run_id.in_(run_set(list(where))),
            *([Result.keyword.in_(keywords)] if keywords is not None else []),
        )
        .group_by(Result.run_id)
    )
    figures = {r[0]: r[1:] for r in rows.all()}
    out: list[RunSummaryOut] = []
    for run_id, (column, device) in sorted(
        where.items(), key=lambda kv: (kv[1][0].request_id, kv[1][1])
    ):
        measured, ranked, top3, top10, avg, ctr_sum = figures.get(run_id, (0, 0, 0, 0, None, None))
        out.append(
            RunSummaryOut(
                request_id=column.request_id,
                run_id=run_id,
                device=device,
                measured_at=column.measured_at,
                measured=int(measured),
                ranked=int(ranked),
                top3=int(top3),
                top10=int(top10),
                average_position=round(float(avg), 2) if avg is not None else None,
                visibility=round(100 * float(ctr_sum or 0) / (measured * CTR_BY_POSITION[1]), 2)
                if measured
                else None,
            )
        )
    return out


SUMMARY_PAGE, MAX_SUMMARY_PAGE = 52, 200


async def summary_page(
    session: ReadSession,
    schedule_id: int,
    cursor: str | None,
    limit: int = SUMMARY_PAGE,
    *,
    tag: str | None = None,
) -> SummaryPage:
    """The per-run figures of the schedule's measured requests, newest first, ``limit`` requests
    a page; ``next_cursor`` is the oldest request id of the page. With a ``tag``, the figures
    are those of the keywords carrying it (RT-71)."""
    checked_limit(limit, MAX_SUMMARY_PAGE)
    keywords = tagged_keywords(schedule_id, checked_tag(tag)) if tag is not None else None
    before = cursor_number(cursor)
    columns = await measured_runs(
        session, schedule_id, before_request=before, limit_requests=limit + 1
    )
    more = len(columns) > limit
    columns = columns[-limit:]
    items = await run_summaries(session, columns, keywords=keywords)
    items.sort(key=lambda s: (-s.request_id, s.device))
    return SummaryPage(
        items=items, next_cursor=str(columns[0].request_id) if more and columns else None
    )
