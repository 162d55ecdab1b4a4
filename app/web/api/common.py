"""What every API module shares: the router factory, row-id path parameters and the
``Idempotency-Key`` wrapper for state-changing handlers (pagination: ``paging`` in
:mod:`app.web.deps`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Annotated, Any, TypeVar, cast

from litestar import MediaType, Request, Response, Router
from litestar.di import NamedDependency, Provide
from litestar.params import Parameter

from app.db.session import UnitOfWork
from app.platform import idempotency
from app.platform.service import Principal
from app.runtime import Runtime
from app.web.access import Auth, authenticated, require_caller
from app.web.auth import CurrentPrincipal, api_principal, get_runtime, provide_runtime

T = TypeVar("T")

REPLAYED_HEADER = "Idempotent-Replayed"

MAX_ROW_ID = 2**63 - 1

RowId = Annotated[int, Parameter(ge=1, le=MAX_ROW_ID, description="A row id (64-bit).")]
"""A path parameter naming a row: ``schedule_id: RowId``. A number no 64-bit id column can hold is
refused (400) before it reaches the database, where it would overflow."""

MAX_VERSION_NUMBER = 2**31 - 1

VersionNumber = Annotated[
    int, Parameter(ge=1, le=MAX_VERSION_NUMBER, description="A version number (32-bit).")
]
"""A funnel's version number (``funnel_versions.number``, a 32-bit column)."""


def api_router(path: str, handlers: Sequence[Any], *, tag: str | None = None) -> Router:
    """A router under ``/api/v1{path}`` whose handlers may take ``principal: CurrentPrincipal``
    (the API key's workspace), ``once: Once`` (see :class:`Idempotency`) and the request's
    session, unit of work and machinery (:mod:`app.web.deps`). Every route on it requires the
    key, whether or not its handler asks for ``principal``."""
    return Router(
        path=f"/api/v1{path}",
        route_handlers=list(handlers),
        dependencies={
            "principal": Provide(api_principal),
            "runtime": Provide(provide_runtime),
            "once": Provide(provide_once),
        },
        tags=[tag or path.strip("/") or "platform"],
        opt=authenticated(Auth.API_KEY),
        guards=[require_caller],
        security=[{"ApiKey": []}],
    )


def principal_tag(principal: Principal) -> str:
    """Who sent an ``Idempotency-Key``: the API key, or the signed-in person."""
    if principal.api_key_id is not None:
        return f"api_key:{principal.api_key_id}"
    return f"user:{principal.user_id}"


async def idempotent(
    request: Request[Any, Any, Any],
    principal: Principal,
    runtime: Runtime,
    action: Callable[[UnitOfWork], Awaitable[T]],
    *,
    status_code: int = 201,
    finish: Callable[[T], Awaitable[T]] | None = None,
) -> Response[T]:
    """Run ``action`` once per ``Idempotency-Key`` header (when the caller sent one).

    ``action`` receives the unit of work to write through and returns the response struct. A retry
    with the same key and body answers the stored response (with ``Idempotent-Replayed: true``)
    without running ``action``; the same key with another body answers 409. Use it in a handler::

        @post("/things")
        async def create_thing(
            request: Request, principal: CurrentPrincipal, runtime: CurrentRuntime,
            data: JSONBody[ThingIn],
        ) -> Response[ThingOut]:
            async def action(uow: UnitOfWork) -> ThingOut:
                return to_out(await service.create(uow.session, principal.workspace_id, data))
            return await idempotent(request, principal, runtime, action)

    ``finish`` runs after the action's commit and gives the final answer (see
    :func:`app.platform.idempotency.run_once`).
    """
    body = await request.body()
    stored = await idempotency.run_once(
        runtime.db,
        runtime.secrets,
        workspace_id=principal.workspace_id,
        principal=principal_tag(principal),
        key=request.headers.get(idempotency.HEADER),
        request_hash=idempotency.fingerprint(request.method, request.url.path, body),
        now=runtime.clock.now(),
        ttl=timedelta(hours=runtime.settings.web.idempotency_ttl_hours),
        status_code=status_code,
        action=action,
        finish=finish,
    )
    headers = {REPLAYED_HEADER: "true"} if stored.replayed else None
    # The stored body is already JSON; the declared type only documents the schema (OpenAPI).
    return Response(
        content=cast(T, stored.body),
        status_code=stored.status_code,
        media_type=MediaType.JSON,
        headers=headers,
    )


class Idempotency:
    """The ``once`` dependency: :func:`idempotent` for this request and caller, so a handler
    needs neither the request nor the runtime to honour ``Idempotency-Key``::

        @post("/things")
        async def create_thing(
            principal: CurrentPrincipal, once: Once, clock: CurrentClock, data: JSONBody[ThingIn]
        ) -> Response[ThingOut]:
            async def action(uow: UnitOfWork) -> ThingOut:
                return to_out(await service.create(uow.session, principal.workspace_id, data))
            return await once(action)

    The action runs in the unit of work :func:`idempotent` opens (a handler that uses ``once``
    takes no ``uow`` of its own)."""

    def __init__(
        self, request: Request[Any, Any, Any], principal: Principal, runtime: Runtime
    ) -> None:
        self._request = request
        self._principal = principal
        self._runtime = runtime

    async def __call__(
        self,
        action: Callable[[UnitOfWork], Awaitable[T]],
        *,
        status_code: int = 201,
        finish: Callable[[T], Awaitable[T]] | None = None,
    ) -> Response[T]:
        return await idempotent(
            self._request,
            self._principal,
            self._runtime,
            action,
            status_code=status_code,
            finish=finish,
        )


async def provide_once(request: Request[Any, Any, Any], principal: CurrentPrincipal) -> Idempotency:
    return Idempotency(request, principal, get_runtime(request))


Once = NamedDependency[Idempotency]
