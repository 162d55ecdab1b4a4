"""Tells the audit log who is calling and from where, for each HTTP request.

The client's address is the one the sign-in throttle believes (:mod:`app.web.client_address`,
``X-Forwarded-For`` only from ``TRUSTED_PROXIES``); the caller is whoever the authentication
guard resolved, read when an action is recorded (the guard runs after this middleware).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import Request
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from app.platform.audit.origin import Actor, Origin, acting_from, actor_of
from app.settings_web import Networks
from app.web.auth import PRINCIPAL_STATE
from app.web.client_address import client_address

_MAX_USER_AGENT = 400


def _caller(scope: Scope) -> Callable[[], Actor | None]:
    def resolved() -> Actor | None:
        principal = scope.get("state", {}).get(PRINCIPAL_STATE)
        return None if principal is None else actor_of(principal)

    return resolved


def _where(scope: Scope, proxies: Networks) -> Callable[[], tuple[str, str]]:
    def read() -> tuple[str, str]:
        request: Request[Any, Any, Any] = Request(scope)
        user_agent = request.headers.get("user-agent", "")[:_MAX_USER_AGENT]
        return client_address(request, proxies), user_agent

    return read


def audit_origin(proxies: Networks) -> Callable[[ASGIApp], ASGIApp]:
    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            origin = Origin(where=_where(scope, proxies), principal=_caller(scope))
            with acting_from(origin):
                await app(scope, receive, send)

        return middleware

    return wrap
