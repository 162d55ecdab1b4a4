"""Platform pages: the home page (getting started, per engine) and the operations page (sweepers,
queue depth, dead jobs); the route lists register sign-in and sign-out (:mod:`.sign_in`) and the
workspace page (:mod:`.workspace_page`) with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Request, Response, get
from litestar.exceptions import PermissionDeniedException
from litestar.response import Template

from app.clock import Clock
from app.db.session import ReadSession
from app.platform import service
from app.platform.operators import is_instance_operator
from app.platform.service import Principal
from app.runtime import Runtime
from app.scheduling.queue import JobQueue, QueueStats
from app.scheduling.unavailable import QueueUnavailable
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_organisation_manager
from app.web.dashboard import activity, getting_started, settings_ui, workspace_hint
from app.web.dashboard.common import page
from app.web.dashboard.sign_in import login, login_page, logout
from app.web.dashboard.workspace_page import (
    create_api_key,
    delete_logo,
    logo_image,
    revoke_api_key,
    rotate_ingest_token,
    rotate_signing_secret,
    set_workspace_timezone,
    switch_workspace,
    upload_logo,
    workspace_page,
)
from app.web.deps import CurrentClock, Queue, Reads
from app.web.ops import sweeper_overview

OPERATIONS_PAGE = "/ui/operations"
FAVICON = (Path(__file__).parent / "static" / "favicon.svg").read_bytes()


async def _status(runtime: Runtime, job_queue: JobQueue) -> dict[str, Any]:
    """The instance's machinery: the sweeps this process registered (the runtime's) and the
    queue. While the queue's broker is not reachable its figures are ``None`` and the page says
    so in their place: the sweepers and the dead jobs (kept in the database) are what an
    operator looks at during an outage."""
    try:
        stats: QueueStats | None = await job_queue.stats()
    except QueueUnavailable:
        stats = None  # the queue logs the outage once
    return {
        "sweepers": await sweeper_overview(runtime),
        "stats": stats,
        "dead_jobs": await job_queue.dead_jobs(10),
        "queue_backend": job_queue.backend,
        "now": runtime.clock.now(),
    }


@get("/")
async def home(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    """A getting-started view per engine, ticked from the workspace's real state."""
    workspace = await service.get_workspace(session, principal.workspace_id)
    steps = await getting_started.journeys(session, principal)
    return page(request, "home.html", principal, workspace=workspace, journeys=steps)


@get(OPERATIONS_PAGE)
async def operations_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    job_queue: Queue,
) -> Template:
    """The workspace's activity for organisation owners and admins; beside it the sweepers and
    the queue, the instance's machinery, for the instance's operators only."""
    require_organisation_manager(principal)
    operator = await is_instance_operator(session, principal)
    return page(
        request,
        "operations.html",
        principal,
        operator=operator,
        **(await _status(runtime, job_queue) if operator else {}),
        activity=await _activity(session, runtime.clock, principal),
    )


async def _activity(session: ReadSession, clock: Clock, principal: Principal) -> dict[str, Any]:
    return await activity.workspace_activity(session, principal.workspace_id, clock.now())


@get("/ui/partials/activity")
async def activity_partial(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
) -> Template:
    """The operations page's charts, refreshed in place by htmx."""
    require_organisation_manager(principal)
    return page(
        request, "_activity.html", principal, activity=await _activity(session, clock, principal)
    )


@get("/ui/partials/status")
async def status_partial(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    job_queue: Queue,
) -> Template:
    """The part of the operations page htmx refreshes (the instance's machinery)."""
    require_organisation_manager(principal)
    if not await is_instance_operator(session, principal):
        raise PermissionDeniedException(
            "The sweepers and the job queue are shown to the instance's operators only"
        )
    return page(request, "_status.html", principal, **await _status(runtime, job_queue))


@get("/favicon.ico", cache=False)
async def favicon() -> Response[bytes]:
    """Browsers and feed readers ask for ``/favicon.ico`` whatever the page links: answer with
    the dashboard's icon instead of a 404 in every log."""
    return Response(
        FAVICON,
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400"},
    )


PUBLIC_ROUTES = [login_page, login, logout, favicon]
ROUTES = [
    home,
    operations_page,
    status_partial,
    activity_partial,
    workspace_page,
    switch_workspace,
    create_api_key,
    revoke_api_key,
    rotate_ingest_token,
    rotate_signing_secret,
    set_workspace_timezone,
    upload_logo,
    delete_logo,
    logo_image,
    *settings_ui.ROUTES,
    *workspace_hint.ROUTES,
]
