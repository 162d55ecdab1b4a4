"""Who is calling: API keys for programs, session cookies for people, ingest tokens for senders."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException

from app.db.session import ReadSession
from app.platform.models import Workspace
from app.platform.operators import is_instance_operator
from app.platform.service import Principal, principal_for_api_key, workspace_for_ingest_token
from app.platform.sessions import principal_for_session, user_workspaces
from app.runtime import Runtime

SESSION_COOKIE = "swl_session"


class LoginRequired(Exception):
    """A dashboard page was asked for without a valid session (answered with a redirect)."""


def get_runtime(connection: ASGIConnection[Any, Any, Any, Any]) -> Runtime:
    runtime: Runtime = connection.app.state.runtime
    return runtime


async def provide_runtime(request: Request[Any, Any, Any]) -> Runtime:
    return get_runtime(request)


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


PRINCIPAL_STATE = "principal"
"""Where the authentication guard (:mod:`app.web.access`) leaves the caller it resolved, so a
handler's ``principal`` dependency does not look the credential up a second time."""


WORKSPACES_STATE = "workspaces"
"""Where the session guard leaves the signed-in person's workspaces (``(id, name)``, by name), so
every dashboard page's header can offer the switch without a query of its own."""


def _resolved(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal | None:
    principal: Principal | None = connection.scope.get("state", {}).get(PRINCIPAL_STATE)
    return principal


def _remember(connection: ASGIConnection[Any, Any, Any, Any], principal: Principal) -> Principal:
    connection.scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
    return principal


async def authenticate_api_key(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """The workspace of the API key in ``Authorization: Bearer <key>``. A ``read`` key is refused
    (403) on every method that may change something."""
    if (known := _resolved(connection)) is not None:
        return known
    header = connection.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise NotAuthorizedException("An API key is required: Authorization: Bearer <key>")
    runtime = get_runtime(connection)
    async with runtime.db.read() as session:
        principal = await principal_for_api_key(session, key.strip(), runtime.clock.now())
    if principal is None:
        raise NotAuthorizedException("The API key is unknown, revoked or expired")
    if principal.scope != "write" and connection.scope.get("method") not in READ_METHODS:
        raise PermissionDeniedException("This API key may only read (scope 'read')")
    return _remember(connection, principal)


async def api_principal(request: Request[Any, Any, Any]) -> Principal:
    """The ``principal`` dependency of API handlers."""
    return await authenticate_api_key(request)


async def session_principal(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal | None:
    token = connection.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    runtime = get_runtime(connection)
    async with runtime.db.read() as session:
        return await principal_for_session(session, token, runtime.clock.now())


async def _session_principal_with_workspaces(
    connection: ASGIConnection[Any, Any, Any, Any],
) -> Principal | None:
    """The signed-in person, and (in the request's state) the workspaces they belong to: both
    read in one transaction."""
    token = connection.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    runtime = get_runtime(connection)
    async with runtime.db.read() as session:
        principal = await principal_for_session(session, token, runtime.clock.now())
        if principal is None or principal.user_id is None:
            return principal
        rows = await user_workspaces(session, principal.user_id)
    menu = [(workspace.id, workspace.name) for workspace, _ in rows]
    connection.scope.setdefault("state", {})[WORKSPACES_STATE] = menu
    return principal


def signed_in_principal(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal | None:
    """The caller the authentication guard resolved for this request, if it ran."""
    return _resolved(connection)


def signed_in_workspaces(connection: ASGIConnection[Any, Any, Any, Any]) -> list[tuple[int, str]]:
    """The signed-in person's workspaces as the session guard read them (empty otherwise)."""
    menu: list[tuple[int, str]] = connection.scope.get("state", {}).get(WORKSPACES_STATE, [])
    return menu


async def authenticate_session(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """The signed-in person; pages without one redirect to the sign-in page."""
    if (known := _resolved(connection)) is not None:
        return known
    principal = await _session_principal_with_workspaces(connection)
    if principal is None:
        if connection.headers.get("hx-request") == "true":
            # An htmx refresh would follow a plain redirect and swap the sign-in page into a
            # fragment of the page: ask htmx to navigate the whole page instead.
            raise NotAuthorizedException(
                "The session has ended; sign in again.", headers={"HX-Redirect": "/login"}
            )
        raise LoginRequired
    return _remember(connection, principal)


async def authenticate_key_or_session(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """An API key when the request sends one; otherwise the signed-in person (401 without
    either: an API route answers programs, never with the sign-in redirect)."""
    if (known := _resolved(connection)) is not None:
        return known
    if connection.headers.get("authorization"):
        return await authenticate_api_key(connection)
    principal = await session_principal(connection)
    if principal is None:
        raise NotAuthorizedException(
            "An API key (Authorization: Bearer <key>) or a signed-in session is required"
        )
    return _remember(connection, principal)


async def ui_principal(request: Request[Any, Any, Any]) -> Principal:
    """The ``principal`` dependency of dashboard pages."""
    return await authenticate_session(request)


async def ingest_workspace(request: Request[Any, Any, Any]) -> Workspace:
    """The workspace of the ingest token in ``X-Ingest-Token`` (or ``?token=``)."""
    token = request.headers.get("x-ingest-token") or request.query_params.get("token") or ""
    if not token:
        raise NotAuthorizedException("An ingest token is required (X-Ingest-Token header)")
    runtime = get_runtime(request)
    async with runtime.db.read() as session:
        workspace = await workspace_for_ingest_token(session, token)
    if workspace is None:
        raise NotAuthorizedException("The ingest token is unknown")
    return workspace


def require_admin(principal: Principal) -> None:
    if not principal.is_admin:
        raise PermissionDeniedException("Only workspace admins may do this")


def require_organisation_manager(principal: Principal) -> None:
    """Organisation-level actions (workspaces, people, the balance, the AI quota) are for the
    organisation's owners and admins, signed in; a workspace API key never has them."""
    if principal.user_id is None:
        raise PermissionDeniedException(
            "This is an organisation-level action: an organisation owner or admin must sign in "
            "to the dashboard to do it (workspace API keys cannot)"
        )
    if not principal.manages_organisation:
        raise PermissionDeniedException("Only organisation owners and admins may do this")


# Handler parameter types: injected by name from the router's dependencies.
CurrentPrincipal = NamedDependency[Principal]
CurrentRuntime = NamedDependency[Runtime]


PLATFORM_DATA = (
    "The queue and the sweepers are the whole instance's, every tenant's jobs included: they are "
    "shown to the instance's operators only (the owners and admins of its first organisation, "
    "signed in). A workspace's own jobs are at GET /api/v1/jobs."
)


async def require_operator(session: ReadSession, principal: Principal) -> None:
    """Platform-wide data is for the instance's operators (PL-5): never a workspace key, nor the
    owners and admins of another organisation (either would see the other tenants' jobs and
    their errors)."""
    if not await is_instance_operator(session, principal):
        raise PermissionDeniedException(PLATFORM_DATA)
