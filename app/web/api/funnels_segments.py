"""Saved segments API (FN-73 to FN-75): a named, described predicate with its live count and its
count over time, usable as a campaign's audience and in funnels (``{"kind": "segment",
"segment_id": n}``); deleting one in use is refused naming its users."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any

import msgspec
from litestar import delete, get, patch, post
from litestar.params import FromPath, JSONBody

from app.db.session import ReadSession
from app.engines.funnels.contacts import saved_segments as segments
from app.engines.funnels.contacts.saved_segment_models import SavedSegment
from app.engines.funnels.contacts.segments import Predicate
from app.schemas import Name, Schema
from app.web.api.common import api_router
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Reads, Writes

Description = Annotated[str, msgspec.Meta(max_length=2000)]


class SavedSegmentIn(Schema):
    name: Name
    predicate: Predicate
    """The conditions (the segment predicate language); fixed once saved."""
    description: Description = ""


class SavedSegmentEditIn(Schema):
    name: Name
    description: Description = ""


class SegmentDayCount(Schema):
    day: date
    count: int


class SavedSegmentOut(Schema):
    id: int
    name: str
    description: str
    predicate: dict[str, Any]
    count: int
    """Contacts matching now."""
    created_at: datetime
    history: list[SegmentDayCount] | None = None
    """One count a day, oldest first (only on a single segment's read)."""
    used_by: list[str] | None = None
    """Campaigns and funnels that use it (only on a single segment's read)."""


async def _out(
    session: ReadSession, segment: SavedSegment, now: datetime, *, full: bool = False
) -> SavedSegmentOut:
    out = SavedSegmentOut(
        id=segment.id,
        name=segment.name,
        description=segment.description,
        predicate=segment.predicate,
        count=await segments.live_count(session, segment, now),
        created_at=segment.created_at,
    )
    if full:
        out.history = [
            SegmentDayCount(d, n) for d, n in await segments.history(session, segment.id)
        ]
        out.used_by = await segments.users_of(session, segment.workspace_id, segment.id)
    return out


@post("/saved-segments")
async def create(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, data: JSONBody[SavedSegmentIn]
) -> SavedSegmentOut:
    now = clock.now()
    segment = await segments.create_segment(
        uow.session,
        principal.workspace_id,
        segments.SegmentData(
            name=data.name,
            description=data.description,
            predicate=msgspec.to_builtins(data.predicate),
        ),
        now,
    )
    return await _out(uow.session, segment, now)


@get("/saved-segments")
async def index(
    principal: CurrentPrincipal, session: Reads, clock: CurrentClock
) -> list[SavedSegmentOut]:
    now = clock.now()
    return [
        await _out(session, s, now)
        for s in await segments.list_segments(session, principal.workspace_id)
    ]


@get("/saved-segments/{segment_id:int}")
async def show(
    principal: CurrentPrincipal, session: Reads, clock: CurrentClock, segment_id: FromPath[int]
) -> SavedSegmentOut:
    segment = await segments.get_segment(session, principal.workspace_id, segment_id)
    return await _out(session, segment, clock.now(), full=True)


@patch("/saved-segments/{segment_id:int}")
async def edit(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    segment_id: FromPath[int],
    data: JSONBody[SavedSegmentEditIn],
) -> SavedSegmentOut:
    now = clock.now()
    segment = await segments.rename_segment(
        uow.session,
        principal.workspace_id,
        segment_id,
        name=data.name,
        description=data.description,
        now=now,
    )
    return await _out(uow.session, segment, now)


@delete("/saved-segments/{segment_id:int}", status_code=204)
async def remove(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, segment_id: FromPath[int]
) -> None:
    """Refused (409 ``segment_in_use``) while a campaign or a funnel uses it, naming them."""
    await segments.delete_segment(uow.session, principal.workspace_id, segment_id, clock.now())


ROUTERS: list[Any] = [api_router("/funnels", [create, index, show, edit, remove], tag="funnels")]
