"""The second step of sign-in: the code page, and enrolment for a person whose organisation
requires a second factor they do not have yet.

Both pages are reached only with the sign-in challenge cookie a right password set; without it
(or once it has expired) they send the browser back to the sign-in page. Every code tried counts
in the sign-in throttle like a password, so guessing codes ends in 429 as guessing passwords
does; the session is opened only after the second step passes.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import URLEncodedBody
from litestar.response import Redirect, Template

from app.errors import DomainError
from app.platform import audit, sessions, two_factor
from app.platform import two_factor_events as events
from app.platform.models import User
from app.platform.signin_challenge import Challenge
from app.runtime import Runtime
from app.web.auth import get_runtime
from app.web.dashboard import sign_in_steps
from app.web.dashboard.common import page
from app.web.dashboard.qr import qr_svg
from app.web.dashboard.sign_in_steps import CODE_PAGE, ENROL_PAGE, SIGNIN_COOKIE


class CodeForm(msgspec.Struct):
    code: str = ""


def _code_page(
    request: Request[Any, Any, Any], *, error: str | None = None, status: int = 200
) -> Template:
    tpl = page(request, "platform/two_factor_code.html", None, error=error)
    tpl.status_code = status
    return tpl


async def _user(runtime: Runtime, challenge: Challenge) -> User | None:
    async with runtime.db.read() as session:
        return await session.get(User, challenge.user_id)


def _signed_in(response: Response[Any], runtime: Runtime, token: str) -> Response[Any]:
    sign_in_steps.set_session_cookie(response, runtime, token)
    response.delete_cookie(SIGNIN_COOKIE)
    return response


async def _burst(runtime: Runtime, user: User, address: str) -> None:
    """After a wrong code: when it was the one that reached the limit, say so once (in the
    organisation's audit log, by an anonymous caller: whoever typed it is not known)."""
    throttle = sign_in_steps.sign_in_throttle(runtime)
    now = runtime.clock.now()
    if throttle.wait(user.email, address, now) is not None:
        async with runtime.db.write() as uow:
            await events.record(
                uow.session,
                "two_factor.failed_code_burst",
                user_id=user.id,
                organisation_id=user.organisation_id,
                now=now,
                actor=audit.ANONYMOUS,
            )


@get(CODE_PAGE)
async def code_page(request: Request[Any, Any, Any]) -> Response[Any]:
    if sign_in_steps.read_challenge(request, get_runtime(request), "code") is None:
        return Redirect("/login")
    return _code_page(request)


@post(CODE_PAGE)
async def submit_code(
    request: Request[Any, Any, Any], data: URLEncodedBody[CodeForm]
) -> Response[Any]:
    """A code from the authenticator app, or a recovery code: a right one opens the session."""
    runtime = get_runtime(request)
    challenge = sign_in_steps.read_challenge(request, runtime, "code")
    user = None if challenge is None else await _user(runtime, challenge)
    if challenge is None or user is None:
        return Redirect("/login")
    throttle = sign_in_steps.sign_in_throttle(runtime)
    address = sign_in_steps.caller_address(request, runtime)
    now = runtime.clock.now()
    if (wait := throttle.attempt(user.email, address, now)) is not None:
        return _code_page(request, error=sign_in_steps.too_many(wait), status=429)
    token = None
    async with runtime.db.write() as uow:
        used = await two_factor.check_second_factor(
            uow.session, runtime.secrets, user_id=user.id, code=data.code[:100], now=now
        )
        if used is not None:
            token = await sessions.open_session(uow.session, user=user, password=None, now=now)
        if used == "recovery_code":
            await events.record(
                uow.session,
                "two_factor.recovery_code_used",
                user_id=user.id,
                organisation_id=user.organisation_id,
                now=now,
                actor=audit.Actor("user", user.id),
            )
    if used is None or token is None:
        await _burst(runtime, user, address)
        return _code_page(request, error="That code is not right, or was used already.", status=401)
    throttle.succeeded(user.email, address)
    return _signed_in(Redirect(challenge.next), runtime, token)


async def _enrol_page(
    request: Request[Any, Any, Any],
    runtime: Runtime,
    user: User,
    *,
    error: str | None = None,
    status: int = 200,
) -> Template:
    async with runtime.db.write() as uow:
        secret = await two_factor.begin_enrolment(
            uow.session, runtime.secrets, user_id=user.id, now=runtime.clock.now()
        )
    uri = two_factor.provisioning_uri(secret, user.email)
    tpl = page(
        request,
        "platform/two_factor_enrol.html",
        None,
        qr=qr_svg(uri, title="QR code of the two-factor secret"),
        secret=secret,
        action=ENROL_PAGE,
        required=True,
        error=error,
    )
    tpl.status_code = status
    return tpl


@get(ENROL_PAGE)
async def enrol_page(request: Request[Any, Any, Any]) -> Response[Any]:
    """Enrolment during sign-in, required by the organisation: nothing else is open until the
    person confirms a code."""
    runtime = get_runtime(request)
    challenge = sign_in_steps.read_challenge(request, runtime, "enrol")
    user = None if challenge is None else await _user(runtime, challenge)
    if challenge is None or user is None:
        return Redirect("/login")
    try:
        return await _enrol_page(request, runtime, user)
    except DomainError:
        return Redirect("/login")  # enrolled meanwhile (another tab): sign in with a code


@post(ENROL_PAGE)
async def confirm_enrolment(
    request: Request[Any, Any, Any], data: URLEncodedBody[CodeForm]
) -> Response[Any]:
    runtime = get_runtime(request)
    challenge = sign_in_steps.read_challenge(request, runtime, "enrol")
    user = None if challenge is None else await _user(runtime, challenge)
    if challenge is None or user is None:
        return Redirect("/login")
    throttle = sign_in_steps.sign_in_throttle(runtime)
    address = sign_in_steps.caller_address(request, runtime)
    now = runtime.clock.now()
    if (wait := throttle.attempt(user.email, address, now)) is not None:
        return await _enrol_page(
            request, runtime, user, error=sign_in_steps.too_many(wait), status=429
        )
    try:
        async with runtime.db.write() as uow:
            codes = await two_factor.confirm_enrolment(
                uow.session, runtime.secrets, user_id=user.id, code=data.code[:100], now=now
            )
            token = await sessions.open_session(uow.session, user=user, password=None, now=now)
            await events.record(
                uow.session,
                "two_factor.enrolled",
                user_id=user.id,
                organisation_id=user.organisation_id,
                now=now,
                actor=audit.Actor("user", user.id),
            )
    except DomainError as exc:
        if exc.status != 422:
            return Redirect("/login")
        await _burst(runtime, user, address)
        return await _enrol_page(request, runtime, user, error=exc.message, status=422)
    throttle.succeeded(user.email, address)
    if token is None:
        return Redirect("/login")
    tpl = page(
        request, "platform/recovery_codes.html", None, codes=codes, continue_to=challenge.next
    )
    return _signed_in(tpl, runtime, token)


PUBLIC_ROUTES = [code_page, submit_code, enrol_page, confirm_enrolment]
