"""Signing in and out in the browser: the sign-in form (with the second step when the
organisation asks for one, see :mod:`.sign_in_steps`), and signing out; after either, the browser
goes only to a same-site path (:func:`safe_next`)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import URLEncodedBody
from litestar.response import Redirect, Template

from app.platform import sessions, setup
from app.web.auth import SESSION_COOKIE, get_runtime, session_principal
from app.web.dashboard import sign_in_steps
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Reads, Writes


class LoginForm(msgspec.Struct):
    email: str = ""
    password: str = ""
    next: str = "/"


def safe_next(target: str) -> str:
    """Only same-site paths: ``//evil.example`` or ``https://…`` would make an open redirect."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


def _login_error(
    request: Request[Any, Any, Any], data: LoginForm, status: int, error: str
) -> Template:
    tpl = page(
        request, "login.html", None, error=error, email=data.email, next=safe_next(data.next)
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
        next=safe_next(request.query_params.get("next", "/")),
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
            second = await sign_in_steps.second_step(session, runtime, user, safe_next(data.next))
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
    redirect = Redirect(safe_next(data.next))
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
