"""The keyword page's explanations (why each movement happened, the results pages side by side,
SERP features over time) and its chart notes: written, changed and deleted from the page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect

from app.db.session import ReadSession
from app.engines.ranktracking.explain import annotations as notes
from app.engines.ranktracking.explain.discovery import discover
from app.engines.ranktracking.explain.features import feature_history
from app.engines.ranktracking.explain.labels import label
from app.engines.ranktracking.explain.movements import keyword_movements
from app.engines.ranktracking.explain.schemas import AnnotationIn, AnnotationPatch
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules import lookup
from app.errors import DomainError, ValidationFailed
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Writes

PREFIX = "/ui/ranktracking/schedules/{schedule_id:int}"


async def keyword_extras(session: ReadSession, schedule: Schedule, keyword: str) -> dict[str, Any]:
    """What the keyword page shows beside its chart: movements, features, notes."""
    if schedule.data_type != "serp":
        return {"movements": None, "feature_grid": None, "notes": []}
    history = await feature_history(session, schedule, keyword)
    return {
        "movements": await keyword_movements(session, schedule, keyword),
        "feature_grid": {
            "rows": [(k, label(k)) for k in history.features],
            "points": history.points,
        },
        "notes": await notes.list_for(session, schedule.id, keyword),
    }


async def schedule_discovery(session: ReadSession, schedule: Schedule) -> Any:
    return await discover(session, schedule) if schedule.data_type == "serp" else None


class NoteForm(msgspec.Struct, kw_only=True):
    keyword: str = ""
    scope: str = "keyword"
    """``keyword``: this keyword's chart; ``schedule``: every chart of the schedule."""
    at: str = ""
    text: str = ""


def _moment(raw: str) -> datetime:
    """A date (``2026-05-01``) or a date and time from the form, in UTC."""
    value = raw.strip()
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationFailed.field(
            "at", "give the date as YYYY-MM-DD (a time may follow)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _back(schedule_id: int, keyword: str, text: str) -> Redirect:
    return Redirect(
        f"/ui/ranktracking/schedules/{schedule_id}/keyword?keyword={quote(keyword)}"
        f"&notice={quote(text)}#rt-notes"
    )


@post(f"{PREFIX}/annotations")
async def create_note(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    data: URLEncodedBody[NoteForm],
) -> Redirect:
    try:
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            body = AnnotationIn(
                at=_moment(data.at),
                text=data.text,
                keyword=data.keyword if data.scope != "schedule" else None,
            )
            await notes.create(uow.session, schedule, body, principal.user_id, clock.now())
        text = "Note added"
    except DomainError as exc:
        text = exc.message
    return _back(schedule_id, data.keyword, text)


@post(f"{PREFIX}/annotations/{{annotation_id:int}}")
async def update_note(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    annotation_id: FromPath[int],
    data: URLEncodedBody[NoteForm],
) -> Redirect:
    try:
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            patch = AnnotationPatch(
                at=_moment(data.at) if data.at.strip() else None, text=data.text
            )
            await notes.update(uow.session, schedule, annotation_id, patch, clock.now())
        text = "Note saved"
    except DomainError as exc:
        text = exc.message
    return _back(schedule_id, data.keyword, text)


@post(f"{PREFIX}/annotations/{{annotation_id:int}}/delete")
async def delete_note(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    annotation_id: FromPath[int],
    data: URLEncodedBody[NoteForm],
) -> Redirect:
    try:
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            await notes.delete(uow.session, schedule, annotation_id, clock.now())
        text = "Note deleted"
    except DomainError as exc:
        text = exc.message
    return _back(schedule_id, data.keyword, text)


ROUTES: list[Any] = [create_note, update_note, delete_note]
