"""Where a schedule's keywords come from and how they are grouped, in the JSON API under
``/api/v1/ranktracking``: Google Search Console properties, a preview of a property's queries and
the chosen ones added to a schedule (RT-68, RT-69); tags on a schedule's keywords (RT-70).

Every lookup is scoped by the caller's workspace: another workspace's schedule answers 404."""

from __future__ import annotations

from typing import Any

from litestar import get, post
from litestar.params import JSONBody

from app.engines.ranktracking import search_console, tags
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.schedules import lookup
from app.engines.ranktracking.schemas import (
    KeywordTagsOut,
    SearchConsoleAddIn,
    SearchConsoleAddOut,
    SearchConsolePreviewIn,
    SearchConsolePreviewOut,
    SearchConsolePropertyOut,
    TagChangeOut,
    TagKeywordsIn,
)
from app.web.api.common import RowId
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import CurrentClock, CurrentSettings, Reads, Writes


def google_of(runtime: Any) -> search_console.Google:
    """The process's Search Console client, token minter and secrets, as the service takes them."""
    deps = RankTrackingDeps.of(runtime)
    return search_console.Google(deps.search_console, deps.google_tokens, deps.secrets)


@get("/search-console/properties")
async def get_search_console_properties(
    principal: CurrentPrincipal, runtime: CurrentRuntime, session: Reads
) -> list[SearchConsolePropertyOut]:
    """The Search Console properties the workspace's service account can read."""
    return await search_console.properties(session, google_of(runtime), principal.workspace_id)


@post("/schedules/{schedule_id:int}/search-console/preview", status_code=200)
async def preview_search_console(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    clock: CurrentClock,
    settings: CurrentSettings,
    schedule_id: RowId,
    data: JSONBody[SearchConsolePreviewIn],
) -> SearchConsolePreviewOut:
    """A property's most-clicked queries over a date range, with clicks, impressions, CTR and
    average position, each marked when the schedule tracks it already. Writes nothing."""
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await search_console.preview(
        session, google_of(runtime), schedule, data, settings.ranktracking, clock.now()
    )


@post("/schedules/{schedule_id:int}/search-console/keywords", status_code=200)
async def add_search_console_keywords(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    schedule_id: RowId,
    data: JSONBody[SearchConsoleAddIn],
) -> SearchConsoleAddOut:
    """Add the chosen queries to the schedule's keywords (its list or its selection); those it
    has already are skipped and reported; ``tag`` tags every chosen keyword."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    return await search_console.add_to_schedule(
        uow.session, settings.ranktracking, schedule, data.keywords, data.tag, clock.now()
    )


@get("/schedules/{schedule_id:int}/tags")
async def get_tags(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId
) -> KeywordTagsOut:
    """The schedule's tags with how many keywords carry each, and each tagged keyword's tags."""
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await tags.schedule_tags(session, schedule_id)


@post("/schedules/{schedule_id:int}/tags", status_code=200)
async def add_tag(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    data: JSONBody[TagKeywordsIn],
) -> TagChangeOut:
    """Put a tag on keywords of the schedule (each must be one of its keywords)."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    return await tags.add_tag(uow.session, schedule, data.tag, data.keywords, clock.now())


@post("/schedules/{schedule_id:int}/tags/remove", status_code=200)
async def remove_tag(
    principal: CurrentPrincipal, uow: Writes, schedule_id: RowId, data: JSONBody[TagKeywordsIn]
) -> TagChangeOut:
    """Take a tag off keywords of the schedule."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    return await tags.remove_tag(uow.session, schedule, data.tag, data.keywords)


HANDLERS: list[Any] = [
    get_search_console_properties,
    preview_search_console,
    add_search_console_keywords,
    get_tags,
    add_tag,
    remove_tag,
]
