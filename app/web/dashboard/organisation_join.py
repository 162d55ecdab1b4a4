"""Joining the instance in the browser: first-run setup and accepting an invitation.

Both are public pages (the setup token or the invitation link is the credential); both end signed
in (or at enrolment, when the organisation requires a second factor).
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.errors import DomainError
from app.platform import invitations, sessions, setup
from app.platform.models import User
from app.settings import Settings
from app.web.auth import SESSION_COOKIE, CurrentRuntime, get_runtime
from app.web.dashboard import sign_in_steps
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, CurrentSettings, Reads, Secrets, Writes

log = logging.getLogger(__name__)


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


def field_errors(exc: DomainError) -> dict[str, str]:
    """Field name → message, for messages shown next to the fields."""
    if exc.details:
        return {str(d.get("field", "")): str(d.get("message", exc.message)) for d in exc.details}
    return {"": exc.message}


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
        return _setup_page(request, kept, field_errors(exc), status=exc.status)
    log.info("first-run setup: %s owns organisation %r", owner.user.email, data.organisation)
    return await _signed_in(request, uow, clock, settings, owner.user, data.password, "/")


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
            request, uow.session, clock, token, field_errors(exc), data.name, exc.status
        )
    return await _signed_in(request, uow, clock, settings, user, data.password, "/")
