"""Why positions moved, in the JSON API under ``/api/v1/ranktracking/schedules/{id}``: a
keyword's movements explained from the stored results pages, its SERP features over time, the
domains found most often above the tracked one, and the notes on the position charts (created,
listed, changed, deleted).

Every lookup is scoped by the caller's workspace: another workspace's schedule answers 404."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import delete, get, patch, post
from litestar.params import FromQuery, JSONBody, QueryParameter

from app.engines.ranktracking.explain import annotations as notes
from app.engines.ranktracking.explain.discovery import DEFAULT_LIMIT, discover
from app.engines.ranktracking.explain.features import feature_history
from app.engines.ranktracking.explain.movements import keyword_movements
from app.engines.ranktracking.explain.schemas import (
    AnnotationIn,
    AnnotationOut,
    AnnotationPatch,
    DiscoveryOut,
    FeatureHistoryOut,
    MovementsOut,
)
from app.engines.ranktracking.keywords import normalise
from app.engines.ranktracking.schedules import lookup
from app.errors import ValidationFailed
from app.pagination import checked_limit
from app.web.api.common import RowId
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Reads, Writes

SCHEDULE = "/schedules/{schedule_id:int}"
NOTES = f"{SCHEDULE}/annotations"
Keyword = Annotated[str, QueryParameter(description="The keyword, as tracked.")]


def _keyword(raw: str) -> str:
    keyword = normalise(raw)
    if not keyword:
        raise ValidationFailed.field("keyword", "name the keyword")
    return keyword


@get(f"{SCHEDULE}/movements")
async def get_movements(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId, keyword: Keyword
) -> MovementsOut:
    """Each recent measurement of the keyword that changed something, newest first, against the
    one before on the same device: who overtook the site, which features appeared or vanished
    and who owns them, what the AI Overview cites, whether the ranking URL changed, and the top
    of both pages side by side."""
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await keyword_movements(session, schedule, _keyword(keyword))


@get(f"{SCHEDULE}/features")
async def get_feature_history(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId, keyword: Keyword
) -> FeatureHistoryOut:
    """The keyword's SERP features per measurement and device, those the site owns, and whether
    the AI Overview cited it."""
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await feature_history(session, schedule, _keyword(keyword))


DISCOVERY_MAX = 50
"""Domains a discovery answers at most."""


@get(f"{SCHEDULE}/competitors/discovered")
async def get_discovered_competitors(
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: RowId,
    limit: Annotated[
        int, QueryParameter(schema_extra={"minimum": 1, "maximum": DISCOVERY_MAX})
    ] = DEFAULT_LIMIT,
) -> DiscoveryOut:
    """The domains ranking above the tracked one on the most results pages of the latest
    measurement, across every keyword and device of the schedule."""
    checked_limit(limit, DISCOVERY_MAX)
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await discover(session, schedule, limit)


@get(NOTES)
async def list_annotations(
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: RowId,
    keyword: FromQuery[str | None] = None,
) -> list[AnnotationOut]:
    """The schedule's chart notes, oldest first; with ``keyword``, the schedule-wide ones and
    that keyword's."""
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await notes.list_for(session, schedule_id, keyword)


@post(NOTES)
async def create_annotation(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    data: JSONBody[AnnotationIn],
) -> AnnotationOut:
    """A note on the schedule's charts (``keyword`` empty: every chart of the schedule)."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    return await notes.create(uow.session, schedule, data, principal.user_id, clock.now())


@patch(f"{NOTES}/{{annotation_id:int}}")
async def update_annotation(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    annotation_id: RowId,
    data: JSONBody[AnnotationPatch],
) -> AnnotationOut:
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    return await notes.update(uow.session, schedule, annotation_id, data, clock.now())


@delete(f"{NOTES}/{{annotation_id:int}}")
async def delete_annotation(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    annotation_id: RowId,
) -> None:
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await notes.delete(uow.session, schedule, annotation_id, clock.now())


HANDLERS: list[Any] = [
    get_movements,
    get_feature_history,
    get_discovered_competitors,
    list_annotations,
    create_annotation,
    update_annotation,
    delete_annotation,
]
