"""The schedule page's requests and child runs as a part of the page, refreshed in place while
the page is open (RT-77): the same template the page includes, read the same way."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.params import FromPath
from litestar.response import Template

from app.engines.ranktracking.records.log import schedule_log
from app.engines.ranktracking.schedules import lookup
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import page
from app.web.deps import Reads

PREFIX = "/ui/ranktracking"


@get(f"{PREFIX}/schedules/{{schedule_id:int}}/partials/runs")
async def runs_partial(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: FromPath[int],
) -> Template:
    """The newest page of the log with its health chart (another workspace's id answers 404
    like the schedule's page)."""
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    log = await schedule_log(session, schedule.id)
    return page(
        request, "ranktracking/_runs.html", principal, schedule=schedule, log=log, live=True
    )


ROUTES: list[Any] = [runs_partial]
