"""Notes people put on a schedule's position charts (RT-73): for the whole schedule or one of its
keywords, at a moment they choose. Every change is audited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import or_, select

from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking.explain.schemas import (
    AnnotationIn,
    AnnotationOut,
    AnnotationPatch,
    ChartNote,
)
from app.engines.ranktracking.explain_models import Annotation
from app.engines.ranktracking.keywords import normalise
from app.engines.ranktracking.models import Schedule
from app.errors import NotFound, ValidationFailed
from app.platform import audit

MAX_TEXT = 300
MAX_PER_SCHEDULE = 1000


class AnnotationNotFound(NotFound):
    code = "annotation_not_found"


def out(a: Annotation) -> AnnotationOut:
    return AnnotationOut(
        id=a.id,
        schedule_id=a.schedule_id,
        keyword=a.keyword,
        at=a.at,
        text=a.text,
        created_at=a.created_at,
        updated_at=a.updated_at,
    )


def _text(raw: str) -> str:
    text = " ".join(raw.split())
    if not text:
        raise ValidationFailed.field("text", "write what happened (it cannot be empty)")
    if len(text) > MAX_TEXT:
        raise ValidationFailed.field("text", f"at most {MAX_TEXT} characters")
    return text


def _keyword(raw: str | None) -> str | None:
    if raw is None or not raw.strip():
        return None
    keyword = normalise(raw)
    if len(keyword) > 200:
        raise ValidationFailed.field("keyword", "at most 200 characters")
    return keyword


async def list_for(
    session: ReadSession, schedule_id: int, keyword: str | None = None
) -> list[AnnotationOut]:
    """The schedule's notes, oldest first; with ``keyword``: the schedule-wide ones and that
    keyword's."""
    query = select(Annotation).where(Annotation.schedule_id == schedule_id)
    if keyword is not None:
        query = query.where(
            or_(Annotation.keyword.is_(None), Annotation.keyword == normalise(keyword))
        )
    rows = await session.scalars(query.order_by(Annotation.at, Annotation.id))
    return [out(a) for a in rows]


def as_notes(items: list[AnnotationOut]) -> list[ChartNote]:
    return [
        ChartNote(
            x=int(a.at.timestamp()), day=a.at.date().isoformat(), label=a.text, kind="user", id=a.id
        )
        for a in items
    ]


async def create(
    session: WriteSession,
    schedule: Schedule,
    data: AnnotationIn,
    user_id: int | None,
    now: datetime,
) -> AnnotationOut:
    text, keyword = _text(data.text), _keyword(data.keyword)
    count = await session.scalar(
        select(Annotation.id).where(Annotation.schedule_id == schedule.id).offset(MAX_PER_SCHEDULE)
    )
    if count is not None:
        raise ValidationFailed.field("text", f"at most {MAX_PER_SCHEDULE} notes per schedule")
    note = Annotation(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        keyword=keyword,
        at=data.at,
        text=text,
        created_by=user_id,
        created_at=now,
        updated_at=now,
    )
    session.add(note)
    await session.flush()
    await _audit(session, "created", schedule, note, None, _values(note), now)
    return out(note)


async def _get(session: WriteSession, schedule: Schedule, annotation_id: int) -> Annotation:
    note = await session.get(Annotation, annotation_id)
    if note is None or note.schedule_id != schedule.id:
        raise AnnotationNotFound("annotation not found")
    return note


async def update(
    session: WriteSession,
    schedule: Schedule,
    annotation_id: int,
    data: AnnotationPatch,
    now: datetime,
) -> AnnotationOut:
    note = await _get(session, schedule, annotation_id)
    before = _values(note)
    if data.text is not None:
        note.text = _text(data.text)
    if data.at is not None:
        note.at = data.at
    note.updated_at = now
    await session.flush()
    await _audit(session, "updated", schedule, note, before, _values(note), now)
    return out(note)


async def delete(
    session: WriteSession, schedule: Schedule, annotation_id: int, now: datetime
) -> None:
    note = await _get(session, schedule, annotation_id)
    before = _values(note)
    await session.delete(note)
    await session.flush()
    await _audit(session, "deleted", schedule, note, before, None, now)


def _values(note: Annotation) -> dict[str, Any]:
    return {"keyword": note.keyword, "at": note.at.isoformat(), "text": note.text}


async def _audit(
    session: WriteSession,
    verb: str,
    schedule: Schedule,
    note: Annotation,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    now: datetime,
) -> None:
    await audit.record(
        session,
        action=f"rank_annotation.{verb}",
        object_type="rank_annotation",
        object_id=note.id,
        workspace_id=schedule.workspace_id,
        organisation_id=schedule.organisation_id,
        before=before,
        after=after,
        now=now,
    )
