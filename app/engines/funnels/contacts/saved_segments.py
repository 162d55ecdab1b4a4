"""Saved segments (FN-73, FN-74, FN-75): a predicate with a name and a description, counted live
and once a day, referred to by campaigns' audiences and funnels' triggers and conditions.

A reference is the predicate ``{"kind": "segment", "segment_id": n}``. When the campaign or the
funnel holding it is saved, :func:`bind` copies the segment's conditions into the reference, so
both evaluators (SQL and Python) need no database read to follow it; a segment's conditions are
fixed once saved (a new set of conditions is a new segment), so the copy never goes stale.

A segment in use by a campaign that has not finished or by a funnel (its draft or its published
version) cannot be deleted: the refusal names who uses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import msgspec
from sqlalchemy import func, select

from app.db.dialect import insert
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.campaigns.models import CANCELLED, DONE, Campaign
from app.engines.funnels.contacts.fields import check_predicate, field_types
from app.engines.funnels.contacts.saved_segment_models import SavedSegment, SegmentCount
from app.engines.funnels.contacts.segments import compile_sql, decode_predicate
from app.engines.funnels.models import Contact, Funnel, FunnelVersion
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import audit

REFERENCE = "segment"
"""The ``kind`` of a predicate that refers to a saved segment."""
HISTORY_DAYS = 90


class SegmentNotFound(NotFound):
    code = "segment_not_found"


class SegmentInUse(Conflict):
    code = "segment_in_use"


@dataclass(frozen=True, slots=True)
class SegmentData:
    name: str
    description: str = ""
    predicate: dict[str, Any] | None = None


# -- references ----------------------------------------------------------------------------------


def _references(raw: Any) -> Iterable[dict[str, Any]]:
    """Every segment reference inside a JSON value (a predicate, a funnel definition)."""
    if isinstance(raw, dict):
        if raw.get("kind") == REFERENCE and "segment_id" in raw:
            yield raw
        for value in raw.values():
            yield from _references(value)
    elif isinstance(raw, list):
        for value in raw:
            yield from _references(value)


def refers_to(raw: Any, segment_id: int) -> bool:
    return any(ref.get("segment_id") == segment_id for ref in _references(raw))


async def bind(session: ReadSession, workspace_id: int, raw: Any) -> Any:
    """``raw`` (a predicate or anything holding predicates) with every segment reference carrying
    its segment's conditions; a reference to a segment that is not this workspace's carries none
    (the validator then names it). Returns a copy; ``raw`` is left as it was."""
    copied = msgspec.json.decode(msgspec.json.encode(raw)) if raw is not None else None
    refs = list(_references(copied))
    wanted = {r["segment_id"] for r in refs if isinstance(r["segment_id"], int)}
    found: dict[int, dict[str, Any]] = {}
    if wanted:
        rows = await session.execute(
            scoped_select(
                SavedSegment, workspace_id, SavedSegment.id, SavedSegment.predicate
            ).where(SavedSegment.id.in_(wanted))
        )
        found = {int(i): p for i, p in rows.all()}
    for ref in refs:
        predicate = found.get(ref["segment_id"]) if isinstance(ref["segment_id"], int) else None
        if predicate is None:
            ref.pop("predicate", None)
        else:
            ref["predicate"] = predicate
    return copied


# -- the segments --------------------------------------------------------------------------------


def _clean_name(name: str) -> str:
    cleaned = name.strip()
    if not 1 <= len(cleaned) <= 200:
        raise ValidationFailed.field("name", "a name of 1 to 200 characters")
    return cleaned


async def _unique(session: ReadSession, workspace_id: int, name: str, but: int | None) -> None:
    taken = await session.scalar(
        scoped_select(SavedSegment, workspace_id, SavedSegment.id).where(SavedSegment.name == name)
    )
    if taken is not None and taken != but:
        raise ValidationFailed.field("name", f"a segment named {name!r} exists already")


async def create_segment(
    session: WriteSession, workspace_id: int, data: SegmentData, now: datetime
) -> SavedSegment:
    name = _clean_name(data.name)
    if data.description and len(data.description) > 2000:
        raise ValidationFailed.field("description", "at most 2000 characters")
    if not data.predicate:
        raise ValidationFailed.field("predicate", "a segment needs at least one condition")
    bound = await bind(session, workspace_id, data.predicate)
    try:
        predicate = decode_predicate(bound)
    except msgspec.ValidationError as exc:
        raise ValidationFailed.field("predicate", str(exc).split(" - at ")[0]) from None
    await check_predicate(session, workspace_id, predicate, field="predicate")
    await _unique(session, workspace_id, name, None)
    segment = SavedSegment(
        workspace_id=workspace_id,
        name=name,
        description=(data.description or "").strip(),
        predicate=bound,
        created_at=now,
        updated_at=now,
    )
    session.add(segment)
    await session.flush()
    await _audit(session, "segment.created", segment, now)
    return segment


async def get_segment(session: ReadSession, workspace_id: int, segment_id: int) -> SavedSegment:
    segment = await session.scalar(
        scoped_select(SavedSegment, workspace_id).where(SavedSegment.id == segment_id)
    )
    if segment is None:
        raise SegmentNotFound(f"segment {segment_id} not found")
    return segment


async def list_segments(session: ReadSession, workspace_id: int) -> list[SavedSegment]:
    return list(
        await session.scalars(scoped_select(SavedSegment, workspace_id).order_by(SavedSegment.name))
    )


async def rename_segment(
    session: WriteSession,
    workspace_id: int,
    segment_id: int,
    *,
    name: str,
    description: str,
    now: datetime,
) -> SavedSegment:
    """A new name or description; the conditions stay (see the module's docstring)."""
    segment = await get_segment(session, workspace_id, segment_id)
    cleaned = _clean_name(name)
    if len(description) > 2000:
        raise ValidationFailed.field("description", "at most 2000 characters")
    await _unique(session, workspace_id, cleaned, segment.id)
    segment.name = cleaned
    segment.description = description.strip()
    segment.updated_at = now
    await session.flush()
    await _audit(session, "segment.updated", segment, now)
    return segment


async def users_of(session: ReadSession, workspace_id: int, segment_id: int) -> list[str]:
    """Who uses the segment, in words (``campaign "Spring sale"``, ``funnel "Welcome"``):
    campaigns not finished, and funnels whose draft or published version refers to it."""
    users: list[str] = []
    campaigns = await session.execute(
        scoped_select(Campaign, workspace_id, Campaign.name, Campaign.audience).where(
            Campaign.status.not_in((DONE, CANCELLED))
        )
    )
    users += [f'campaign "{n}"' for n, a in campaigns.all() if refers_to(a, segment_id)]
    funnels = await session.execute(
        scoped_select(
            Funnel, workspace_id, Funnel.name, Funnel.draft, FunnelVersion.definition
        ).outerjoin(FunnelVersion, FunnelVersion.id == Funnel.current_version_id)
    )
    users += [
        f'funnel "{n}"'
        for n, draft, published in funnels.all()
        if refers_to(draft, segment_id) or refers_to(published, segment_id)
    ]
    return users


async def delete_segment(
    session: WriteSession, workspace_id: int, segment_id: int, now: datetime
) -> None:
    """Remove a segment nobody uses.

    Raises:
        SegmentInUse: naming every campaign and funnel that uses it.
    """
    segment = await get_segment(session, workspace_id, segment_id)
    users = await users_of(session, workspace_id, segment_id)
    if users:
        raise SegmentInUse(
            f'segment "{segment.name}" is used by {", ".join(users)}: remove it from them first',
            details=[{"field": "segment", "message": u, "code": "in_use"} for u in users],
        )
    await _audit(session, "segment.deleted", segment, now)
    await session.delete(segment)
    await session.flush()


async def _audit(session: WriteSession, action: str, segment: SavedSegment, now: datetime) -> None:
    await audit.record(
        session,
        action=action,
        object_type="segment",
        object_id=segment.id,
        workspace_id=segment.workspace_id,
        after={"name": segment.name},
        now=now,
    )


# -- counts --------------------------------------------------------------------------------------


async def live_count(session: ReadSession, segment: SavedSegment, now: datetime) -> int:
    """How many live contacts match now (the same SQL as the segment builder's count)."""
    ws = segment.workspace_id
    custom = await field_types(session, ws)
    matches = compile_sql(
        decode_predicate(segment.predicate), workspace_id=ws, now=now, custom=custom
    )
    total = await session.scalar(
        scoped_select(Contact, ws, func.count())
        .select_from(Contact)
        .where(Contact.deleted_at.is_(None), matches)
    )
    return int(total or 0)


async def history(session: ReadSession, segment_id: int) -> list[tuple[date, int]]:
    """The daily counts, oldest first (the last :data:`HISTORY_DAYS`)."""
    rows = await session.execute(
        select(SegmentCount.day, SegmentCount.count)
        .where(SegmentCount.segment_id == segment_id)
        .order_by(SegmentCount.day.desc())
        .limit(HISTORY_DAYS)
    )
    return sorted((d, int(n)) for d, n in rows.all())


async def take_daily_counts(session: WriteSession, now: datetime) -> int:
    """Count every saved segment once for ``now``'s day (UTC); a segment counted that day
    already keeps its count. Returns how many counts were taken."""
    today = now.date()
    done = set(
        await session.scalars(select(SegmentCount.segment_id).where(SegmentCount.day == today))
    )
    taken = 0
    for segment in await session.scalars(select(SavedSegment).order_by(SavedSegment.id)):
        if segment.id in done:
            continue
        count = await live_count(session, segment, now)
        await session.execute(
            insert(session, SegmentCount)
            .values(segment_id=segment.id, day=today, count=count, taken_at=now)
            .on_conflict_do_nothing()
        )
        taken += 1
    return taken
