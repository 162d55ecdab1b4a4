"""Authentication by default: every route requires a caller unless it is declared public.

Each router (or handler) declares in its ``opt`` either how its callers authenticate
(:func:`authenticated`: a workspace API key, or a signed-in session) or why it is public
(:func:`public`, with the reason). One guard resolves the caller before any parameter or body is
read, so a route whose handler never asks for ``principal`` is still guarded, and an anonymous
caller hears 401 (or the sign-in redirect) rather than a validation error. It sits on every router
with authenticated routes; public routes, which it would wave through, may go without it (the
webhook receivers do). :func:`verify_routes` runs when the application is built and refuses to
start it while any route declares neither, or an authenticated route is not guarded.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.exceptions import ImproperlyConfiguredException, NotAuthorizedException
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.routes import ASGIRoute, HTTPRoute

from app.web.auth import authenticate_api_key, authenticate_key_or_session, authenticate_session
from app.web.id_bounds import check_request
from app.web.rate_limits import check_rate_limits
from app.web.receivers import ReceiverRoute

PUBLIC = "public"
"""``opt`` key: why the route answers without credentials."""
AUTH = "auth"
"""``opt`` key: how the route's callers authenticate (an :class:`Auth`)."""


class Auth(StrEnum):
    API_KEY = "api_key"
    """``Authorization: Bearer swl_…`` (401 without it)."""
    SESSION = "session"
    """The dashboard's session cookie (a redirect to the sign-in page without it)."""
    API_KEY_OR_SESSION = "api_key_or_session"
    """An API key when one is sent, else the session cookie (401 without either): API reads
    for people, such as the instance's operators (PL-5)."""


def public(reason: str) -> dict[str, str]:
    """``opt`` of a route that answers anyone; ``reason`` says what protects it instead."""
    if not reason.strip():
        raise ValueError("a public route states why it is public")
    return {PUBLIC: reason}


def authenticated(kind: Auth) -> dict[str, Auth]:
    """``opt`` of a route that requires a caller authenticated this way."""
    return {AUTH: kind}


_AUTHENTICATORS = {
    Auth.API_KEY: authenticate_api_key,
    Auth.SESSION: authenticate_session,
    Auth.API_KEY_OR_SESSION: authenticate_key_or_session,
}


async def require_caller(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """The application's guard: resolve the route's caller or refuse the request (also when the
    caller is over its rate limit), then the integers of its path and query out of their columns'
    range (:mod:`app.web.id_bounds`)."""
    if handler.opt.get(PUBLIC):
        return
    kind = handler.opt.get(AUTH)
    if kind not in _AUTHENTICATORS:
        # verify_routes makes this unreachable in a built app; refuse rather than serve openly.
        raise NotAuthorizedException("This route declares no authentication")
    principal = await _AUTHENTICATORS[Auth(kind)](connection)
    await check_rate_limits(connection, principal)
    # Only now: an anonymous caller hears 401 whatever the ids it sends (PL-10).
    check_request(connection)


def route_handlers(app: Litestar) -> Iterator[tuple[str, HTTPRouteHandler | ReceiverRoute]]:
    """Every HTTP handler and receiver of ``app`` with its path."""
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                yield route.path, handler
        elif isinstance(route, ASGIRoute) and isinstance(route.route_handler, ReceiverRoute):
            yield route.path, route.route_handler


def public_routes(app: Litestar) -> dict[tuple[str, str], str]:
    """``(method, path) -> reason`` for every route that answers without credentials (the
    OPTIONS handler Litestar adds to a path inherits the path's declaration)."""
    out: dict[tuple[str, str], str] = {}
    for path, handler in route_handlers(app):
        reason = handler.opt.get(PUBLIC)
        if reason:
            for method in handler.http_methods:
                out[(method, path)] = str(reason)
    return out


def verify_routes(app: Litestar) -> None:
    """Refuse an application with a route that is neither authenticated nor declared public, one
    that declares both, a public route under ``/api/`` (programs always use a key there), or an
    authenticated route the guard does not cover."""
    problems: list[str] = []
    for path, handler in route_handlers(app):
        where = f"{'/'.join(sorted(handler.http_methods))} {path}"
        is_public = bool(handler.opt.get(PUBLIC))
        kind = handler.opt.get(AUTH)
        if not is_public and require_caller not in handler.resolve_guards():
            problems.append(f"{where}: the authentication guard does not cover it")
        if is_public and kind is not None:
            problems.append(f"{where}: declared both public and authenticated")
        elif not is_public and kind not in _AUTHENTICATORS:
            problems.append(f"{where}: declares neither an authentication nor why it is public")
        if is_public and path.startswith("/api/"):
            problems.append(f"{where}: an /api/ route is never public")
    if problems:
        raise ImproperlyConfiguredException(
            "Routes without a declared access rule:\n  " + "\n  ".join(problems)
        )
