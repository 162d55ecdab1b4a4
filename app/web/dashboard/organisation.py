"""The organisation in the browser: first-run setup, invitations (sending and accepting), and the
organisation page where owners and admins manage workspaces and people.

Setup and accepting an invitation are public pages (the setup token or the invitation link is the
credential); both end signed in. The organisation page is for organisation owners and admins.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.errors import DomainError
from app.integrations.mail import MailSender, OutgoingEmail
from app.integrations.mail.errors import MailError
from app.platform import invitations, organisation, sessions, setup
from app.platform.models import User
from app.platform.service import Principal
from app.settings import Settings
from app.web.auth import (
    SESSION_COOKIE,
    CurrentPrincipal,
    CurrentRuntime,
    get_runtime,
    require_organisation_manager,
)
from app.web.dashboard import sign_in_steps
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, CurrentSettings, Reads, Secrets, Writes

log = logging.getLogger(__name__)

ORG_PAGE = "/ui/organisation"


class SetupForm(msgspec.Struct):
    token: str = ""
    organisation: str = ""
    workspace: str = ""
    name: str = ""
    email: str = ""
    password: str = ""


class AcceptForm(msgspec.Struct):
    name: str = ""
    password: str = ""


class WorkspaceForm(msgspec.Struct):
    name: str = ""


class InviteForm(msgspec.Struct):
    email: str = ""
    workspace_id: int = 0
    role: str = "member"


class RoleForm(msgspec.Struct):
    role: str = ""


async def _signed_in(
    request: Request[Any, Any, Any],
    uow: UnitOfWork,
    clock: Clock,
    settings: Settings,
    user: User,
    password: str,
    target: str,
) -> Response[Any]:
    """Open a session for ``user`` and send the browser to ``target`` with its cookie — or first
    to enrolment, when the organisation requires a second factor of them."""
    second = await sign_in_steps.second_step(uow.session, get_runtime(request), user, target)
    if second is not None:
        return second
    token = await sessions.open_session(uow.session, user=user, password=password, now=clock.now())
    redirect = Redirect(target if token else "/login")
    if token:
        redirect.set_cookie(
            SESSION_COOKIE,
            token,
            httponly=True,
            samesite="lax",
            secure=settings.web.secure_cookies,
            max_age=int(sessions.SESSION_LIFETIME.total_seconds()),
        )
    return redirect


def _form_error(exc: DomainError) -> dict[str, str]:
    """Field name → message, for messages shown next to the fields."""
    if exc.details:
        return {str(d.get("field", "")): str(d.get("message", exc.message)) for d in exc.details}
    return {"": exc.message}


# -- first-run setup ---------------------------------------------------------------------------


def _setup_page(
    request: Request[Any, Any, Any], form: SetupForm, errors: dict[str, str], status: int = 200
) -> Template:
    tpl = page(request, "platform/setup.html", None, form=form, errors=errors)
    tpl.status_code = status
    return tpl


@get("/setup")
async def setup_page(request: Request[Any, Any, Any], session: Reads) -> Template:
    """Shown only while the instance has no owner; afterwards it is gone (404)."""
    if not await setup.needs_setup(session):
        raise NotFoundException("This instance is set up: sign in instead.")
    return _setup_page(request, SetupForm(), {})


@post("/setup")
async def complete_setup(
    request: Request[Any, Any, Any],
    runtime: CurrentRuntime,
    uow: Writes,
    secrets: Secrets,
    clock: CurrentClock,
    settings: CurrentSettings,
    data: URLEncodedBody[SetupForm],
) -> Response[Any]:
    # The runtime only for its session secret, which the setup token is derived from.
    if not await setup.needs_setup(uow.session):
        raise NotFoundException("This instance is set up: sign in instead.")
    kept = msgspec.structs.replace(data, token="", password="")
    if not setup.token_matches(runtime.session_secret, data.token):
        log.warning("first-run setup refused: wrong setup token")
        return _setup_page(
            request,
            kept,
            {"token": "This is not the setup token (see the log at start, or run "
             "python -m app setup-token)."},
            status=403,
        )  # fmt: skip
    try:
        async with uow.attempt():
            owner = await setup.complete_first_run(
                uow.session,
                secrets,
                organisation=data.organisation,
                workspace=data.workspace,
                email=data.email,
                password=data.password,
                name=data.name,
                now=clock.now(),
            )
    except DomainError as exc:
        return _setup_page(request, kept, _form_error(exc), status=exc.status)
    log.info("first-run setup: %s owns organisation %r", owner.user.email, data.organisation)
    return await _signed_in(request, uow, clock, settings, owner.user, data.password, "/")


# -- accepting an invitation -------------------------------------------------------------------


async def _accept_page(
    request: Request[Any, Any, Any],
    session: ReadSession,
    clock: Clock,
    token: str,
    errors: dict[str, str],
    name: str = "",
    status: int = 200,
) -> Template:
    found = await invitations.find_open(session, token, clock.now())
    tpl = page(
        request,
        "platform/accept.html",
        None,
        invitation=found.invitation,
        workspace=found.workspace,
        token=token,
        name=name,
        errors=errors,
    )
    tpl.status_code = status
    return tpl


@get("/invite/{token:str}")
async def accept_page(
    request: Request[Any, Any, Any], session: Reads, clock: CurrentClock, token: FromPath[str]
) -> Template:
    return await _accept_page(request, session, clock, token, {})


@post("/invite/{token:str}")
async def accept_invitation(
    request: Request[Any, Any, Any],
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    token: FromPath[str],
    data: URLEncodedBody[AcceptForm],
) -> Response[Any]:
    try:
        async with uow.attempt():
            user = await invitations.accept(
                uow.session, token=token, password=data.password, name=data.name, now=clock.now()
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _accept_page(
            request, uow.session, clock, token, _form_error(exc), data.name, exc.status
        )
    return await _signed_in(request, uow, clock, settings, user, data.password, "/")


# -- the organisation page ---------------------------------------------------------------------


async def _org_page(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    clock: Clock,
    *,
    status: int = 200,
    **extra: Any,
) -> Template:
    require_organisation_manager(principal)
    workspaces = await organisation.organisation_workspaces(session, principal.organisation_id)
    people = await organisation.people(session, principal.organisation_id)
    pending = await invitations.pending(session, principal.organisation_id, clock.now())
    context: dict[str, Any] = {
        "workspaces": workspaces,
        "workspace_names": {w.id: w.name for w in workspaces},
        "people": people,
        "pending": pending,
        "errors": {},
        "invite": InviteForm(workspace_id=principal.workspace_id),
        "new_workspace": None,
        "new_invitation": None,
        "mail_error": None,
        **extra,
    }
    tpl = page(request, "platform/organisation.html", principal, **context)
    tpl.status_code = status
    return tpl


@get(ORG_PAGE)
async def organisation_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
) -> Template:
    return await _org_page(request, principal, session, clock)


@post(f"{ORG_PAGE}/workspaces")
async def create_workspace(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    clock: CurrentClock,
    data: URLEncodedBody[WorkspaceForm],
) -> Template:
    """Create a workspace (its creator becomes its admin); its ingest token and webhook signing
    secret are shown once, on this response."""
    require_organisation_manager(principal)
    assert principal.user_id is not None
    try:
        async with uow.attempt():
            created = await organisation.create_workspace(
                uow.session,
                secrets,
                organisation_id=principal.organisation_id,
                creator_id=principal.user_id,
                name=data.name,
                now=clock.now(),
            )
    except DomainError as exc:
        return await _org_page(
            request,
            principal,
            uow.session,
            clock,
            status=exc.status,
            errors={"workspace": exc.message},
        )
    return await _org_page(request, principal, uow.session, clock, new_workspace=created)


@post(f"{ORG_PAGE}/workspaces/{{workspace_id:int}}/rename")
async def rename_workspace(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    workspace_id: FromPath[int],
    data: URLEncodedBody[WorkspaceForm],
) -> Response[Any]:
    require_organisation_manager(principal)
    try:
        async with uow.attempt():
            await organisation.rename_workspace(
                uow.session,
                organisation_id=principal.organisation_id,
                workspace_id=workspace_id,
                name=data.name,
                now=clock.now(),
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _org_page(
            request,
            principal,
            uow.session,
            clock,
            status=exc.status,
            errors={"rename": exc.message},
        )
    return Redirect(ORG_PAGE)


async def send_invitation(
    settings: Settings, *, invitation_id: int, to: str, workspace: str, link: str
) -> str | None:
    """Mail the invitation link; the reason it could not be sent, or None."""
    email = OutgoingEmail(
        to=[to],
        subject=f"You are invited to {workspace} on Sweepline",
        text=(
            f"Hello,\n\nyou are invited to join the workspace {workspace} on Sweepline.\n"
            f"Open this link to set your password and sign in (it works once, for "
            f"{settings.security.invitation_ttl_hours} hours):\n\n{link}\n"
        ),
        message_id=f"invitation-{invitation_id}@{_mail_domain(settings)}",
    )
    try:
        await MailSender(settings.mail).send(email)
    except MailError as exc:
        log.warning("invitation mail to %s not sent: %s", to, exc)
        return str(exc)
    return None


def _mail_domain(settings: Settings) -> str:
    return settings.mail.from_address.rpartition("@")[2] or "localhost"


@post(f"{ORG_PAGE}/invitations")
async def invite(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    data: URLEncodedBody[InviteForm],
) -> Template:
    """Invite someone by e-mail: the link is mailed and shown once to the inviter.

    The invitation is committed in a unit of work of its own before the mail is sent (a link
    mailed must work, and no transaction waits on the mail server); the page, which says whether
    the mail went, is read afterwards from ``session``, whose transaction starts at its first
    query."""
    require_organisation_manager(principal)
    assert principal.user_id is not None
    try:
        async with runtime.db.write() as uow:
            created = await invitations.invite(
                uow.session,
                organisation_id=principal.organisation_id,
                workspace_id=data.workspace_id,
                email=data.email,
                role=data.role,
                invited_by=principal.user_id,
                now=runtime.clock.now(),
                lifetime=timedelta(hours=runtime.settings.security.invitation_ttl_hours),
            )
            workspace = await organisation.org_workspace(
                uow.session, principal.organisation_id, data.workspace_id
            )
    except DomainError as exc:
        return await _org_page(
            request,
            principal,
            session,
            runtime.clock,
            status=exc.status,
            errors=_form_error(exc),
            invite=data,
        )
    link = f"{runtime.settings.web.public_url}{invitations.accept_path(created.token)}"
    mail_error = await send_invitation(
        runtime.settings,
        invitation_id=created.invitation.id,
        to=created.invitation.email,
        workspace=workspace.name,
        link=link,
    )
    return await _org_page(
        request, principal, session, runtime.clock, new_invitation=link, mail_error=mail_error
    )


@post(f"{ORG_PAGE}/invitations/{{invitation_id:int}}/revoke")
async def revoke_invitation(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, invitation_id: FromPath[int]
) -> Redirect:
    require_organisation_manager(principal)
    await invitations.revoke(
        uow.session,
        organisation_id=principal.organisation_id,
        invitation_id=invitation_id,
        now=clock.now(),
    )
    return Redirect(ORG_PAGE)


@post(f"{ORG_PAGE}/people/{{user_id:int}}/role")
async def set_role(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    user_id: FromPath[int],
    data: URLEncodedBody[RoleForm],
) -> Response[Any]:
    require_organisation_manager(principal)
    try:
        async with uow.attempt():
            await organisation.set_org_role(
                uow.session,
                organisation_id=principal.organisation_id,
                actor_role=principal.org_role or "",
                user_id=user_id,
                role=data.role,
                now=clock.now(),
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _org_page(
            request,
            principal,
            uow.session,
            clock,
            status=exc.status,
            errors={"people": exc.message},
        )
    return Redirect(ORG_PAGE)


@post(f"{ORG_PAGE}/people/{{user_id:int}}/remove")
async def remove_person(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    user_id: FromPath[int],
) -> Response[Any]:
    """Remove a person from the organisation; their sessions end at once."""
    require_organisation_manager(principal)
    assert principal.user_id is not None
    try:
        async with uow.attempt():
            await organisation.remove_person(
                uow.session,
                organisation_id=principal.organisation_id,
                actor_id=principal.user_id,
                actor_role=principal.org_role or "",
                user_id=user_id,
                now=clock.now(),
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _org_page(
            request,
            principal,
            uow.session,
            clock,
            status=exc.status,
            errors={"people": exc.message},
        )
    return Redirect(ORG_PAGE)


PUBLIC_ROUTES = [setup_page, complete_setup, accept_page, accept_invitation]
ROUTES = [
    organisation_page,
    create_workspace,
    rename_workspace,
    invite,
    revoke_invitation,
    set_role,
    remove_person,
]
