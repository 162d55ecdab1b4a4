"""Platform pages: sign-in and sign-out, the home page (getting started, per engine), the
operations page (sweepers, queue depth, dead jobs) and the workspace page (switch workspace, API
keys, ingest token, signing secret, members)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.exceptions import PermissionDeniedException
from litestar.params import Body, FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession
from app.engines.adrules import rules as adrules_rules
from app.errors import ValidationFailed
from app.platform import logos, service, sessions, setup, workspace_zone
from app.platform.models import API_KEY_SCOPES
from app.platform.operators import is_instance_operator
from app.platform.service import Principal
from app.runtime import Runtime
from app.scheduling.queue import JobQueue, QueueStats
from app.scheduling.unavailable import QueueUnavailable
from app.web.auth import (
    SESSION_COOKIE,
    CurrentPrincipal,
    CurrentRuntime,
    get_runtime,
    require_admin,
    require_organisation_manager,
    session_principal,
)
from app.web.dashboard import (
    activity,
    getting_started,
    settings_ui,
    sign_in_steps,
    workspace_hint,
)
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Queue, Reads, Secrets, Writes
from app.web.ops import sweeper_overview

WORKSPACE_PAGE = "/ui/workspace"
OPERATIONS_PAGE = "/ui/operations"
FAVICON = (Path(__file__).parent / "static" / "favicon.svg").read_bytes()


class LoginForm(msgspec.Struct):
    email: str = ""
    password: str = ""
    next: str = "/"


class SwitchForm(msgspec.Struct):
    workspace_id: int
    next: str = "/"
    """Where to land afterwards (a same-site path): the page the switch was made from."""


class ZoneForm(msgspec.Struct):
    timezone: str = ""


class ApiKeyForm(msgspec.Struct):
    name: str = ""
    scope: str = "write"
    expires_days: str = ""
    """Empty: the key does not expire."""


def _safe_next(target: str) -> str:
    """Only same-site paths: ``//evil.example`` or ``https://…`` would make an open redirect."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


def _login_error(
    request: Request[Any, Any, Any], data: LoginForm, status: int, error: str
) -> Template:
    tpl = page(
        request, "login.html", None, error=error, email=data.email, next=_safe_next(data.next)
    )
    tpl.status_code = status
    return tpl


@get("/login")
async def login_page(request: Request[Any, Any, Any], session: Reads) -> Template | Redirect:
    if await session_principal(request) is not None:
        return Redirect("/")
    if await setup.needs_setup(session):
        return Redirect("/setup")
    return page(
        request,
        "login.html",
        None,
        error=None,
        email="",
        next=_safe_next(request.query_params.get("next", "/")),
    )


@post("/login")
async def login(
    request: Request[Any, Any, Any],
    data: URLEncodedBody[LoginForm],
) -> Response[Any]:
    # Two transactions of its own: the password is verified on a read session (argon2 must not
    # hold SQLite's write lock), and only a person who passed gets a session written.
    runtime = get_runtime(request)
    throttle = sign_in_steps.sign_in_throttle(runtime)
    address = sign_in_steps.caller_address(request, runtime)
    now = runtime.clock.now()
    # Counted before the password is verified: concurrent guesses cannot all pass the check.
    if (wait := throttle.attempt(data.email, address, now)) is not None:
        if throttle.newly_tripped(data.email, address, now):
            async with runtime.db.write() as uow:
                await sessions.record_sign_in_burst(uow.session, email=data.email, now=now)
        return _login_error(request, data, 429, sign_in_steps.too_many(wait))
    token = None
    async with runtime.db.read() as session:
        user = await sessions.authenticate(session, email=data.email, password=data.password)
        second = None
        if user is not None:
            second = await sign_in_steps.second_step(session, runtime, user, _safe_next(data.next))
    if second is not None:
        # The attempt stays counted until the second step passes: a known password does not
        # buy fresh guesses at the code.
        return second
    if user is not None:
        async with runtime.db.write() as uow:
            token = await sessions.open_session(
                uow.session, user=user, password=data.password, now=now
            )
    if token is None:
        return _login_error(request, data, 401, "Wrong e-mail or password.")
    throttle.succeeded(data.email, address)
    redirect = Redirect(_safe_next(data.next))
    sign_in_steps.set_session_cookie(redirect, runtime, token)
    return redirect


@post("/logout")
async def logout(request: Request[Any, Any, Any], uow: Writes, clock: CurrentClock) -> Redirect:
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        await sessions.sign_out(uow.session, token, now=clock.now())
    redirect = Redirect("/login")
    redirect.delete_cookie(SESSION_COOKIE)
    return redirect


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


# -- workspace page ----------------------------------------------------------------------------


async def _workspace_page(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    clock: Clock,
    *,
    status_code: int = 200,
    **extra: Any,
) -> Template:
    workspace = await service.get_workspace(session, principal.workspace_id)
    assert principal.user_id is not None
    workspaces = await sessions.user_workspaces(session, principal.user_id)
    keys = await service.list_api_keys(session, principal.workspace_id, limit=200)
    logo = await logos.get_logo(session, principal.workspace_id)
    members = await service.workspace_members(session, principal.workspace_id, limit=200)
    context: dict[str, Any] = {
        "workspace": workspace,
        "workspaces": workspaces,
        "api_keys": keys[:200],
        "members": members[:200],
        "new_key": None,
        "new_ingest_token": None,
        "new_signing_secret": None,
        "now": clock.now(),
        "key_error": None,
        "key_name": "",
        "zone_error": None,
        "zone_value": workspace.timezone,
        "zones": sorted(workspace_zone.iana_zones()),
        "has_logo": logo is not None,
        "logo_version": int(logo.updated_at.timestamp()) if logo else 0,
        "logo_error": None,
        "max_logo_kb": logos.MAX_LOGO_BYTES // 1024,
        **extra,
    }
    tpl = page(request, "platform/workspace.html", principal, **context)
    tpl.status_code = status_code
    return tpl


@get(WORKSPACE_PAGE)
async def workspace_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
) -> Template:
    return await _workspace_page(request, principal, session, clock)


@post(f"{WORKSPACE_PAGE}/switch")
async def switch_workspace(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    data: URLEncodedBody[SwitchForm],
) -> Redirect:
    """Make another of the person's workspaces the current one (stored in the session)."""
    token = request.cookies.get(SESSION_COOKIE, "")
    await sessions.switch_workspace(uow.session, token=token, workspace_id=data.workspace_id)
    return Redirect(_safe_next(data.next))


@post(f"{WORKSPACE_PAGE}/api-keys")
async def create_api_key(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: URLEncodedBody[ApiKeyForm],
) -> Template:
    """Create a key and show it once, on this response only."""
    require_admin(principal)
    name = data.name.strip()
    error = None
    if not name or len(name) > 200:
        error = "Give the key a name of 1 to 200 characters."
    elif data.scope not in API_KEY_SCOPES:
        error = "Choose the scope: read or write."
    elif data.expires_days and not (
        data.expires_days.isdigit() and 1 <= int(data.expires_days) <= 3650
    ):
        error = "Expires after: a whole number of days from 1 to 3650, or empty for never."
    if error is not None:
        return await _workspace_page(
            request,
            principal,
            uow.session,
            clock,
            status_code=422,
            key_error=error,
            key_name=name[:200],
        )
    now = clock.now()
    expires = now + timedelta(days=int(data.expires_days)) if data.expires_days else None
    _, raw = await service.create_api_key(
        uow.session,
        workspace_id=principal.workspace_id,
        name=name,
        now=now,
        scope=data.scope,
        expires_at=expires,
    )
    return await _workspace_page(request, principal, uow.session, clock, new_key=raw)


@post(f"{WORKSPACE_PAGE}/api-keys/{{key_id:int}}/revoke")
async def revoke_api_key(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, key_id: FromPath[int]
) -> Redirect:
    require_admin(principal)
    await service.revoke_api_key(
        uow.session, workspace_id=principal.workspace_id, key_id=key_id, now=clock.now()
    )
    return Redirect(WORKSPACE_PAGE)


@post(f"{WORKSPACE_PAGE}/ingest-token")
async def rotate_ingest_token(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, uow: Writes, clock: CurrentClock
) -> Template:
    """Issue a new ingest token and show it once; the previous token stops working."""
    require_admin(principal)
    token = await service.rotate_ingest_token(uow.session, principal.workspace_id, now=clock.now())
    return await _workspace_page(request, principal, uow.session, clock, new_ingest_token=token)


@post(f"{WORKSPACE_PAGE}/signing-secret")
async def rotate_signing_secret(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    clock: CurrentClock,
) -> Template:
    """Issue a new webhook signing secret and show it once; signatures made with the previous
    secret stop verifying at once."""
    require_admin(principal)
    secret = await service.rotate_webhook_secret(
        uow.session, secrets, principal.workspace_id, now=clock.now()
    )
    return await _workspace_page(request, principal, uow.session, clock, new_signing_secret=secret)


@get("/favicon.ico", cache=False)
async def favicon() -> Response[bytes]:
    """Browsers and feed readers ask for ``/favicon.ico`` whatever the page links: answer with
    the dashboard's icon instead of a 404 in every log."""
    return Response(
        FAVICON,
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400"},
    )


@post(f"{WORKSPACE_PAGE}/timezone")
async def set_workspace_timezone(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: URLEncodedBody[ZoneForm],
) -> Template | Redirect:
    """Set the workspace's time zone (workspace admins), as ``PATCH /api/v1/workspace`` does."""
    require_admin(principal)
    try:
        async with uow.attempt():
            ws = await workspace_zone.set_workspace_timezone(
                uow.session,
                organisation_id=principal.organisation_id,
                workspace_id=principal.workspace_id,
                timezone=data.timezone[:64],
                now=clock.now(),
            )
            await adrules_rules.workspace_zone_changed(
                uow.session, workspace_id=ws.id, timezone=ws.timezone, now=clock.now()
            )
    except ValidationFailed as exc:
        message = exc.details[0]["message"] if exc.details else exc.message
        return await _workspace_page(
            request,
            principal,
            uow.session,
            clock,
            status_code=422,
            zone_error=message,
            zone_value=data.timezone[:64],
        )
    return Redirect(f"{WORKSPACE_PAGE}#timezone")


LogoUpload = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.MULTI_PART)]


@post(f"{WORKSPACE_PAGE}/logo")
async def upload_logo(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: LogoUpload,
) -> Template | Redirect:
    """The workspace's logo (admins): PNG or JPEG, recognised by its bytes, at most 200 KB; shown
    on the e-mail report and on shared report pages."""
    require_admin(principal)
    upload = data.get("logo")
    raw = await upload.read(logos.MAX_LOGO_BYTES + 1) if isinstance(upload, UploadFile) else b""
    try:
        async with uow.attempt():
            await logos.put_logo(
                uow.session,
                workspace_id=principal.workspace_id,
                organisation_id=principal.organisation_id,
                data=raw,
                now=clock.now(),
            )
    except ValidationFailed as exc:
        message = exc.details[0]["message"] if exc.details else exc.message
        return await _workspace_page(
            request, principal, uow.session, clock, status_code=422, logo_error=message
        )
    return Redirect(f"{WORKSPACE_PAGE}#logo")


@post(f"{WORKSPACE_PAGE}/logo/delete")
async def delete_logo(principal: CurrentPrincipal, uow: Writes, clock: CurrentClock) -> Redirect:
    require_admin(principal)
    await logos.remove_logo(
        uow.session,
        workspace_id=principal.workspace_id,
        organisation_id=principal.organisation_id,
        now=clock.now(),
    )
    return Redirect(f"{WORKSPACE_PAGE}#logo")


@get(f"{WORKSPACE_PAGE}/logo", cache=False)
async def logo_image(principal: CurrentPrincipal, session: Reads) -> Response[bytes]:
    """The signed-in person's workspace's logo (the settings page's preview)."""
    logo = await logos.get_logo(session, principal.workspace_id)
    if logo is None:
        return Response(b"", status_code=404, media_type="text/plain")
    return Response(
        logo.data, media_type=logo.content_type, headers={"Cache-Control": "private, max-age=60"}
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
