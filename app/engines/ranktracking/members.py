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
    if schedule.list_id is None:
        keywords = list(schedule.keywords or [])
        return Members(keywords[:limit], len(keywords))
    keywords = await list_keywords(session, schedule.list_id, limit + 1)
    if len(keywords) <= limit:
        return Members(keywords, len(keywords))
    return Members(keywords[:limit], await list_size(session, schedule.list_id))
