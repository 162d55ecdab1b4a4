"""Tags on a schedule's keywords (RT-70): put a tag on keywords, take it off, list the tags, and
the statement the positions table and the per-run figures filter by (RT-71).

A tag is normalised like a keyword (trimmed, whitespace collapsed, case-folded) so "Brand" and
"brand " are one tag. Only the schedule's current keywords can be tagged: a keyword it does not
measure is refused naming it, with nothing written. A keyword that leaves the schedule keeps its
tags, so its history stays grouped if it comes back.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, delete, func, select

from app.db.dialect import insert_ignoring
from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking.errors import ScheduleStateConflict
from app.engines.ranktracking.keywords import normalise, normalise_all
from app.engines.ranktracking.members import resolve
from app.engines.ranktracking.models import ARCHIVED, Schedule
from app.engines.ranktracking.schemas import KeywordTagsOut, TagChangeOut, TagOut
from app.engines.ranktracking.tag_models import MAX_TAG_LENGTH, KeywordTag
from app.errors import ValidationFailed

MEMBER_LIMIT = 100_000
"""Read every member when checking keywords (a list holds at most 10,000)."""


def checked_tag(raw: str, field: str = "tag") -> str:
    """The normalised tag, or a 422 naming ``field``."""
    tag = normalise(raw)
    if not tag:
        raise ValidationFailed.field(field, "a tag needs at least one character")
    if len(tag) > MAX_TAG_LENGTH:
        raise ValidationFailed.field(field, f"a tag has at most {MAX_TAG_LENGTH} characters")
    return tag


async def _members(session: ReadSession, schedule: Schedule, raw: list[str]) -> list[str]:
    """``raw`` normalised, each one a current keyword of the schedule (else a 422)."""
    wanted = normalise_all(raw).keywords
    if not wanted:
        raise ValidationFailed.field("keywords", "name at least one keyword")
    members = set((await resolve(session, schedule, MEMBER_LIMIT)).keywords)
    unknown = [k for k in wanted if k not in members]
    if unknown:
        shown = ", ".join(f'"{k}"' for k in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ValidationFailed.field(
            "keywords", f"not a keyword of this schedule: {shown}{more}", code="unknown_keyword"
        )
    return wanted


async def _count(session: ReadSession, schedule_id: int, tag: str) -> int:
    return int(
        await session.scalar(
            select(func.count())
            .select_from(KeywordTag)
            .where(KeywordTag.schedule_id == schedule_id, KeywordTag.tag == tag)
        )
        or 0
    )


async def _tagged(
    session: ReadSession, schedule_id: int, tag: str, keywords: list[str]
) -> set[str]:
    rows = await session.execute(
        select(KeywordTag.keyword).where(
            KeywordTag.schedule_id == schedule_id,
            KeywordTag.tag == tag,
            KeywordTag.keyword.in_(keywords),
        )
    )
    return set(rows.scalars())


async def add_tag(
    session: WriteSession, schedule: Schedule, raw_tag: str, raw: list[str], now: datetime
) -> TagChangeOut:
    """Put the tag on the keywords; those that carry it already are reported unchanged."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be edited")
    tag = checked_tag(raw_tag)
    keywords = await _members(session, schedule, raw)
    already = await _tagged(session, schedule.id, tag, keywords)
    new = [k for k in keywords if k not in already]
    if new:
        # Ignoring conflicts: a concurrent request tagging the same keyword is not an error.
        await session.execute(
            insert_ignoring(session, KeywordTag, ["schedule_id", "keyword", "tag"]),
            [
                {"schedule_id": schedule.id, "keyword": k, "tag": tag, "created_at": now}
                for k in new
            ],
        )
    return TagChangeOut(
        tag=tag,
        changed=new,
        unchanged=[k for k in keywords if k in already],
        keyword_count=await _count(session, schedule.id, tag),
    )


async def remove_tag(
    session: WriteSession, schedule: Schedule, raw_tag: str, raw: list[str]
) -> TagChangeOut:
    """Take the tag off the keywords (any keyword may be named: one that left the schedule can
    still lose its tag); those without it are reported unchanged."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be edited")
    tag = checked_tag(raw_tag)
    keywords = normalise_all(raw).keywords
    if not keywords:
        raise ValidationFailed.field("keywords", "name at least one keyword")
    had = await _tagged(session, schedule.id, tag, keywords)
    if had:
        await session.execute(
            delete(KeywordTag).where(
                KeywordTag.schedule_id == schedule.id,
                KeywordTag.tag == tag,
                KeywordTag.keyword.in_(sorted(had)),
            )
        )
    return TagChangeOut(
        tag=tag,
        changed=[k for k in keywords if k in had],
        unchanged=[k for k in keywords if k not in had],
        keyword_count=await _count(session, schedule.id, tag),
    )


async def schedule_tags(session: ReadSession, schedule_id: int) -> KeywordTagsOut:
    rows = (
        await session.execute(
            select(KeywordTag.tag, KeywordTag.keyword)
            .where(KeywordTag.schedule_id == schedule_id)
            .order_by(KeywordTag.tag, KeywordTag.keyword)
        )
    ).all()
    counts: dict[str, int] = {}
    by_keyword: dict[str, list[str]] = {}
    for tag, keyword in rows:
        counts[tag] = counts.get(tag, 0) + 1
        by_keyword.setdefault(keyword, []).append(tag)
    return KeywordTagsOut(
        tags=[TagOut(tag=t, keyword_count=n) for t, n in sorted(counts.items())],
        keywords=dict(sorted(by_keyword.items())),
    )


def tagged_keywords(schedule_id: int, tag: str) -> Select[str]:
    """The schedule's keywords carrying ``tag``, as a subquery for the reports' filters."""
    return select(KeywordTag.keyword).where(
        KeywordTag.schedule_id == schedule_id, KeywordTag.tag == tag
    )
