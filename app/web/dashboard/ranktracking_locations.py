"""The schedule wizard's location picker: ``GET /ui/ranktracking/partials/locations?q=`` answers the
``<option>`` elements of the location ``<datalist>`` for what was typed (an htmx swap, no script
of our own), from the provider's synced list (RT-60, RT-62)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get
from litestar.params import QueryParameter
from litestar.response import Template

from app.engines.ranktracking import location_sync, locations
from app.engines.ranktracking.deps import RankTrackingDeps
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.common import page

PICKER_LIMIT = 30


@get("/ui/ranktracking/partials/locations")
async def location_options(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    q: Annotated[str, QueryParameter(max_length=200)] = "",
    location_code: Annotated[str, QueryParameter(max_length=200)] = "",
) -> Template:
    """The picker's options; the input itself sends its value as ``location_code``."""
    deps = RankTrackingDeps.of(runtime)
    await location_sync.ensure_synced(deps)
    async with deps.db.read() as session:
        found = await locations.search(session, q or location_code, limit=PICKER_LIMIT)
    return page(request, "ranktracking/_location_options.html", principal, locations=found)


ROUTES: list[Any] = [location_options]
