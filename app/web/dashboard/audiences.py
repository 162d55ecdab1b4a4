"""Audience pages under ``/ui/funnels``: the segment builder (predicate rows with a live count and
the first matching contacts, handed on to a new campaign) and the workspace's tags, lists and
custom fields, each with its contact count and a form to add one.

The count answers from the same SQL compilation of the predicate as the API's segment preview
(FN-10); the names are created through the same contact services as the API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, JSONBody, URLEncodedBody
from litestar.response import Redirect, Template

from app.db.session import ReadSession, UnitOfWork
from app.engines.funnels import reads
from app.engines.funnels.contacts import saved_segments
from app.engines.funnels.contacts.fields import define_field, field_types
from app.engines.funnels.contacts.memberships import ensure_names
from app.engines.funnels.contacts.predicate_checks import problems as predicate_problems
from app.engines.funnels.contacts.saved_segment_models import SavedSegment
from app.engines.funnels.contacts.saved_segments import SegmentInUse, list_segments
from app.engines.funnels.contacts.segments import FIELD_TYPES, STANDARD_FIELDS, decode_predicate
from app.engines.funnels.models import ContactList, Tag
from app.errors import DomainError
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal, require_admin
from app.web.dashboard.common import error_message, page
from app.web.deps import CurrentClock, Reads, Writes

SEGMENTS = "/ui/funnels/segments"
LABELS = "/ui/funnels/labels"
SAMPLE = 20
FIELD_LABELS = {"key": "Key", "type": "Type", "label": "Label", "name": "Name"}


_OPS = {
    "eq": "is",
    "ne": "is not",
    "gt": "is more than",
    "gte": "is at least",
    "lt": "is less than",
    "lte": "is at most",
    "contains": "contains",
    "exists": "is set",
    "not_exists": "is not set",
}


def describe(predicate: Any, *, top: bool = True, names: Mapping[int, str] | None = None) -> str:
    """A predicate (as stored JSON) in words, for pages that show an audience or a segment
    (``has tag vip or email contains carol``); ``None`` is everyone with an e-mail address."""
    if predicate is None:
        return "everyone with an e-mail address" if top else ""
    if not isinstance(predicate, dict):
        return str(predicate)
    kind = predicate.get("kind")
    if kind in ("all", "any"):
        parts = [describe(p, top=False, names=names) for p in predicate.get("predicates") or []]
        joined = (" and " if kind == "all" else " or ").join(parts) or "everyone"
        return joined if top or len(parts) < 2 else f"({joined})"
    if kind == "not":
        return f"not {describe(predicate.get('predicate'), top=False, names=names)}"
    if kind == "segment":
        ref = predicate.get("segment_id")
        name = (names or {}).get(ref) if isinstance(ref, int) else None
        return f"in saved segment {name!r}" if name else f"in saved segment {ref}"
    if kind == "has_tag":
        return f"has tag {predicate.get('tag')}"
    if kind == "in_list":
        return f"in list {predicate.get('list')}"
    if kind == "event_count":
        window = predicate.get("within_days")
        within = f" in the last {window} days" if window else ""
        op = _OPS.get(str(predicate.get("op", "gte")), predicate.get("op"))
        return f"event {predicate.get('event')} {op} {predicate.get('count', 1)} times{within}"
    name = predicate.get("field") or predicate.get("path")
    op = _OPS.get(str(predicate.get("op")), predicate.get("op"))
    if predicate.get("op") in ("exists", "not_exists"):
        return f"{name} {op}"
    return f"{name} {op} {predicate.get('value')!r}"


async def builder_options(session: ReadSession, workspace_id: int) -> dict[str, Any]:
    """What the predicate rows offer: fields with their types, tags and lists."""
    custom = await field_types(session, workspace_id)
    return {
        "fields": [{"name": k, "type": t} for k, t in sorted(STANDARD_FIELDS.items())]
        + [{"name": k, "type": t} for k, t in sorted(custom.items())],
        "tags": await reads.tag_names(session, workspace_id),
        "lists": await reads.list_names(session, workspace_id),
        "segments": [
            {"id": s.id, "name": s.name} for s in await list_segments(session, workspace_id)
        ],
    }


@dataclass(frozen=True, slots=True)
class SavedRow:
    segment: SavedSegment
    count: int
    history: list[tuple[date, int]]
    used_by: list[str]


async def _saved_rows(session: ReadSession, workspace_id: int, now: datetime) -> list[SavedRow]:
    return [
        SavedRow(
            s,
            await saved_segments.live_count(session, s, now),
            (await saved_segments.history(session, s.id))[-14:],
            await saved_segments.users_of(session, workspace_id, s.id),
        )
        for s in await saved_segments.list_segments(session, workspace_id)
    ]


async def _segments(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    now: datetime,
    **extra: Any,
) -> Template:
    options = await builder_options(session, principal.workspace_id)
    form = extra.get("form") or {}
    tpl = page(
        request,
        "funnels/segments.html",
        principal,
        builder={
            **options,
            "count_url": f"{SEGMENTS}/count",
            "initial": _json_object(form.get("predicate")),
        },
        saved=await _saved_rows(session, principal.workspace_id, now),
        describe=describe,
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = extra.get("status", 422)
    return tpl


def _json_object(text: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


@get(SEGMENTS)
async def segments_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    notice: FromQuery[str | None] = None,
) -> Template:
    return await _segments(request, principal, session, clock.now(), notice=notice)


class SaveForm(msgspec.Struct, kw_only=True):
    name: str = ""
    description: str = ""
    predicate: str = ""


SAVE_LABELS = {"name": "Name", "description": "Description", "predicate": "Conditions"}


@post(f"{SEGMENTS}/saved")
async def save_segment_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: URLEncodedBody[SaveForm],
) -> Template | Redirect:
    """Save the builder's conditions under a name (FN-73)."""
    require_admin(principal)
    now = clock.now()
    form = {"name": data.name, "description": data.description, "predicate": data.predicate}
    predicate = _json_object(data.predicate)
    try:
        async with uow.attempt():
            segment = await saved_segments.create_segment(
                uow.session,
                principal.workspace_id,
                saved_segments.SegmentData(data.name, data.description, predicate),
                now,
            )
    except DomainError as exc:
        return await _segments(
            request,
            principal,
            uow.session,
            now,
            error=error_message(exc, SAVE_LABELS),
            form=form,
        )
    return Redirect(f"{SEGMENTS}?notice={quote(f'Saved segment {segment.name}')}#saved")


@post(f"{SEGMENTS}/saved/{{segment_id:int}}/delete")
async def delete_segment_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    segment_id: FromPath[int],
) -> Template | Redirect:
    """Delete a saved segment; refused while a campaign or a funnel uses it, naming them (FN-75)."""
    require_admin(principal)
    now = clock.now()
    try:
        async with uow.attempt():
            await saved_segments.delete_segment(
                uow.session, principal.workspace_id, segment_id, now
            )
    except SegmentInUse as exc:
        return await _segments(
            request, principal, uow.session, now, error=f"Not deleted: {exc.message}", status=409
        )
    return Redirect(f"{SEGMENTS}?notice=Segment+deleted#saved")


class CountIn(msgspec.Struct):
    predicate: Any = None
    """``None``: every contact."""


@post(f"{SEGMENTS}/count", status_code=200)
async def count_segment(
    principal: CurrentPrincipal, session: Reads, clock: CurrentClock, data: JSONBody[CountIn]
) -> dict[str, Any]:
    """How many contacts match the rows now, and the first of them; a predicate with problems
    answers them (in the rows' words) instead of a count."""
    ws = principal.workspace_id
    try:
        predicate = None if data.predicate is None else decode_predicate(data.predicate)
    except msgspec.ValidationError as exc:
        return {"count": None, "sample": [], "problems": [str(exc).split(" - at ")[0]]}
    custom = await field_types(session, ws)
    if predicate is not None and (problems := predicate_problems(predicate, custom)):
        return {"count": None, "sample": [], "problems": [_sentence(p) for p in problems]}
    total, rows = await reads.segment_matches(
        session, ws, predicate, now=clock.now(), custom=custom, sample=SAMPLE
    )
    return {
        "count": total,
        "sample": [{"id": i, "email": e or f"#{i}"} for i, e in rows],
        "problems": [],
        "campaign_url": "/ui/funnels/campaigns"
        + ("" if predicate is None else "?segment=" + quote(json.dumps(data.predicate))),
    }


def _sentence(problem: str) -> str:
    problem = problem.replace("'AllOf' needs at least one predicate", "a group needs a condition")
    problem = problem.replace("'AnyOf' needs at least one predicate", "a group needs a condition")
    return problem[:1].upper() + problem[1:]


async def _labels(
    request: Request[Any, Any, Any], principal: Principal, session: ReadSession, **extra: Any
) -> Template:
    ws = principal.workspace_id
    tpl = page(
        request,
        "funnels/labels.html",
        principal,
        tags=await reads.tags_with_counts(session, ws),
        lists=await reads.lists_with_counts(session, ws),
        fields=await reads.field_definitions(session, ws),
        field_types=FIELD_TYPES,
        **extra,
    )
    if any(k.endswith("_error") for k in extra):
        tpl.status_code = 422
    return tpl


@get(LABELS)
async def labels_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    return await _labels(request, principal, session)


class NameForm(msgspec.Struct, kw_only=True):
    name: str = ""


class FieldForm(msgspec.Struct, kw_only=True):
    key: str = ""
    type: str = "text"
    label: str = ""


def _clean(name: str) -> str | None:
    cleaned = name.strip()
    return cleaned if 0 < len(cleaned) <= 100 else None


async def _add_name(
    request: Request[Any, Any, Any],
    principal: Principal,
    uow: UnitOfWork,
    model: type[Tag] | type[ContactList],
    which: str,
    data: NameForm,
) -> Template | Redirect:
    name = _clean(data.name)
    if name is None:
        return await _labels(
            request,
            principal,
            uow.session,
            **{f"{which}_error": "Name: 1 to 100 characters", f"{which}_value": data.name},
        )
    await ensure_names(uow.session, model, principal.workspace_id, [name])
    return Redirect(f"{LABELS}?added={quote(name)}#{which}s")


@post(f"{LABELS}/tags")
async def add_tag_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    data: URLEncodedBody[NameForm],
) -> Template | Redirect:
    return await _add_name(request, principal, uow, Tag, "tag", data)


@post(f"{LABELS}/lists")
async def add_list_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    data: URLEncodedBody[NameForm],
) -> Template | Redirect:
    return await _add_name(request, principal, uow, ContactList, "list", data)


@post(f"{LABELS}/fields")
async def add_field_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    data: URLEncodedBody[FieldForm],
) -> Template | Redirect:
    key = data.key.strip()
    try:
        async with uow.attempt():
            await define_field(uow.session, principal.workspace_id, key, data.type, data.label)
    except DomainError as exc:
        return await _labels(
            request,
            principal,
            uow.session,
            field_error=error_message(exc, FIELD_LABELS),
            field_form=data,
        )
    return Redirect(f"{LABELS}?added={quote(key)}#fields")


ROUTES: list[Any] = [
    segments_page,
    save_segment_page,
    delete_segment_page,
    count_segment,
    labels_page,
    add_tag_page,
    add_list_page,
    add_field_page,
]
