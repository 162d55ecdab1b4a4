"""The organisation page, where organisation owners and admins manage workspaces and people and
send invitations. Its public routes, first-run setup and accepting an invitation, are
:mod:`.organisation_join`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession
from app.errors import DomainError
from app.integrations.mail import MailSender, OutgoingEmail
from app.integrations.mail.errors import MailError
from app.platform import invitations, organisation
from app.platform.service import Principal
from app.settings import Settings
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_organisation_manager
from app.web.dashboard.common import page
from app.web.dashboard.organisation_join import (
    accept_invitation,
    accept_page,
    complete_setup,
    field_errors,
    setup_page,
)
from app.web.deps import CurrentClock, Reads, Secrets, Writes

log = logging.getLogger(__name__)

ORG_PAGE = "/ui/organisation"


class WorkspaceForm(msgspec.Struct):
    name: str = ""


class InviteForm(msgspec.Struct):
    email: str = ""
    workspace_id: int = 0
    role: str = "member"


class RoleForm(msgspec.Struct):
    role: str = ""


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
            errors=field_errors(exc),
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
