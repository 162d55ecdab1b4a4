"""Sign-in, sign-out and the home page (sweepers, queue depth, dead jobs)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import URLEncodedBody
from litestar.response import Redirect, Template

from app.platform import service
from app.runtime import Runtime
from app.scheduling.sweeper import sweeper_states
from app.web.auth import (
    SESSION_COOKIE,
    CurrentPrincipal,
    CurrentRuntime,
    get_runtime,
    session_principal,
)
from app.web.dashboard.common import page


class LoginForm(msgspec.Struct):
    email: str = ""
    password: str = ""


@get("/login")
async def login_page(request: Request[Any, Any, Any]) -> Template | Redirect:
    if await session_principal(request) is not None:
        return Redirect("/")
    return page(request, "login.html", None, error=None, email="")


@post("/login")
async def login(
    request: Request[Any, Any, Any],
    data: URLEncodedBody[LoginForm],
) -> Response[Any]:
    runtime = get_runtime(request)
    async with runtime.db.write() as uow:
        token = await service.sign_in(
            uow.session, email=data.email, password=data.password, now=runtime.clock.now()
        )
    if token is None:
        tpl = page(request, "login.html", None, error="Wrong e-mail or password.", email=data.email)
        tpl.status_code = 401
        return tpl
    redirect = Redirect("/")
    redirect.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="lax",
        secure=runtime.settings.web.secure_cookies,
        max_age=int(service.SESSION_LIFETIME.total_seconds()),
    )
    return redirect


@post("/logout")
async def logout(request: Request[Any, Any, Any]) -> Redirect:
    runtime = get_runtime(request)
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        async with runtime.db.write() as uow:
            await service.sign_out(uow.session, token)
    redirect = Redirect("/login")
    redirect.delete_cookie(SESSION_COOKIE)
    return redirect


async def _status(runtime: Runtime) -> dict[str, Any]:
    now = runtime.clock.now()
    return {
        "sweepers": await sweeper_states(runtime.db),
        "stats": await runtime.queue.stats(),
        "dead_jobs": await runtime.queue.dead_jobs(10),
        "queue_backend": runtime.queue.backend,
        "now": now,
    }


@get("/")
async def home(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    async with runtime.db.read() as session:
        workspace = await service.get_workspace(session, principal.workspace_id)
    return page(request, "home.html", principal, workspace=workspace, **await _status(runtime))


@get("/ui/partials/status")
async def status_partial(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    return page(request, "_status.html", principal, **await _status(runtime))


PUBLIC_ROUTES = [login_page, login, logout]
ROUTES = [home, status_partial]
