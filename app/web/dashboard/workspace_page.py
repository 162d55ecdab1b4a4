"""The workspace page: switch workspace, API keys, the ingest token, the signing secret, the
workspace's time zone and logo, and its members."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession
from app.engines.adrules import rules as adrules_rules
from app.errors import ValidationFailed
from app.platform import logos, service, sessions, workspace_zone
from app.platform.models import API_KEY_SCOPES
from app.platform.service import Principal
from app.web.auth import SESSION_COOKIE, CurrentPrincipal, require_admin
from app.web.dashboard.common import page
from app.web.dashboard.sign_in import safe_next
from app.web.deps import CurrentClock, Reads, Secrets, Writes

WORKSPACE_PAGE = "/ui/workspace"


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
    return Redirect(safe_next(data.next))


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
