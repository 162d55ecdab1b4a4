"""Resolving a schedule's keywords at request time (RT-3 to RT-6)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from app.db.session import ReadSession
from app.engines.ranktracking.models import ListKeyword, Schedule


@dataclass(frozen=True, slots=True)
class Members:
    keywords: list[str]
    total: int
    """How many members the source has (may exceed ``len(keywords)`` when over the limit)."""

    @property
    def over(self) -> bool:
        return self.total > len(self.keywords)


def over_run_limit_reason(total: int, limit: int) -> str:
    """RT-5: why a source of ``total`` keywords cannot be requested when a run may request at
    most ``limit``; the refusal of creation and estimates and the failed run's message both say
    it in these words."""
    return f"the list has {total} keywords; a run may request at most {limit}"


async def list_keywords(session: ReadSession, list_id: int, limit: int | None = None) -> list[str]:
    stmt = (
        select(ListKeyword.keyword).where(ListKeyword.list_id == list_id).order_by(ListKeyword.id)
    )
    if limit is not None:
        stmt = stmt.limit(limit)
    return list((await session.execute(stmt)).scalars())


async def list_size(session: ReadSession, list_id: int) -> int:
    return int(
        await session.scalar(
            select(func.count()).select_from(ListKeyword).where(ListKeyword.list_id == list_id)
        )
        or 0
    )


async def resolve(session: ReadSession, schedule: Schedule, limit: int) -> Members:
    """The current members: the fixed selection, or the list's members read now. At most
    ``limit`` are loaded; ``total`` tells whether there were more (never a silent truncation)."""
    return (await resolve_many(session, [schedule], limit))[schedule.id]


async def resolve_many(
    session: ReadSession, schedules: list[Schedule], limit: int
) -> dict[int, Members]:
    """:func:`resolve` for many schedules, reading every list's first ``limit + 1`` members in
    one statement (the hourly sweep admits schedules in batches)."""
    list_ids = sorted({s.list_id for s in schedules if s.list_id is not None})
    loaded: dict[int, list[str]] = {}
    if list_ids:
        rank = (
            func.row_number()
            .over(partition_by=ListKeyword.list_id, order_by=ListKeyword.id)
            .label("n")
        )
        ranked = (
            select(ListKeyword.list_id, ListKeyword.keyword, rank)
            .where(ListKeyword.list_id.in_(list_ids))
            .subquery()
        )
        rows = await session.execute(
            select(ranked.c.list_id, ranked.c.keyword)
            .where(ranked.c.n <= limit + 1)
            .order_by(ranked.c.list_id, ranked.c.n)
        )
        for list_id, keyword in rows:
            loaded.setdefault(list_id, []).append(keyword)
    out: dict[int, Members] = {}
    for schedule in schedules:
        if schedule.list_id is None:
            keywords = list(schedule.keywords or [])
            out[schedule.id] = Members(keywords[:limit], len(keywords))
            continue
        keywords = loaded.get(schedule.list_id, [])
        if len(keywords) <= limit:
            out[schedule.id] = Members(keywords, len(keywords))
        else:
            total = await list_size(session, schedule.list_id)
            out[schedule.id] = Members(keywords[:limit], total)
    return out
