"""What a handler asks for by parameter name, provided by Litestar for the one request.

- ``session: Reads`` — a read-only session (:data:`~app.db.session.ReadSession`), closed when the
  handler is done; code that takes it cannot write.
- ``uow: Writes`` — the request's unit of work: committed once when the handler returns normally,
  rolled back when it raises (the error is then answered as usual). A commit that fails is the
  request's error, never a silent success; jobs enqueued through it are sent after the commit.
  A form handler tries its writes in ``async with uow.attempt():`` (a savepoint): when they are
  refused, only they are taken back and the form is shown again from the same transaction.
- ``clock: CurrentClock``, ``settings: CurrentSettings``, ``secrets: Secrets`` (the secret box),
  ``job_queue: Queue``, ``guard: Guard`` (the address guard for URLs a user set) — the process's
  machinery a handler uses, one part each instead of the whole :class:`~app.runtime.Runtime`.
- ``paging: Paging`` — a list's checked ``cursor`` and ``limit`` (:mod:`app.pagination`); a list
  with another page size declares ``dependencies={"paging": paging(default=…, maximum=…)}``.

Every router gets them from :data:`DEPENDENCIES`; a handler receives only what it names. A handler
takes a session or a unit of work, not both: one request, one transaction.
"""

# No ``from __future__ import annotations``: Litestar reads the annotations of the ``paging``
# provider, whose bounds are the factory's arguments, at run time.
from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Request
from litestar.di import NamedDependency, Provide
from litestar.params import QueryParameter, SkipValidation

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.integrations.http_guard import AddressGuard, shared_guard
from app.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from app.pagination import Paging as PagingValue
from app.platform.crypto import SecretBox
from app.scheduling.queue import JobQueue
from app.settings import Settings
from app.web.auth import get_runtime

Cursor = Annotated[
    str | None,
    QueryParameter(
        description="The ``next_cursor`` of the previous page.",
        # What app.pagination.cursor_number reads (a decimal number of up to 19 digits).
        schema_extra={"pattern": "^[0-9]{0,19}$"},
    ),
]


async def provide_read_session(request: Request[Any, Any, Any]) -> AsyncIterator[ReadSession]:
    async with get_runtime(request).db.read() as session:
        try:
            yield session
        except BaseException:
            # The handler failed: the session closes here and Litestar raises the handler's error
            # once every dependency of the request has been closed (re-raising here would leave
            # the others open).
            return


async def provide_unit_of_work(request: Request[Any, Any, Any]) -> AsyncIterator[UnitOfWork]:
    handler_error: BaseException | None = None
    try:
        async with get_runtime(request).db.write() as uow:
            try:
                yield uow
            except BaseException as exc:
                handler_error = exc
                raise  # leaving the block with it rolls the transaction back
    except BaseException as exc:
        if exc is handler_error:
            return  # rolled back; Litestar raises it after closing the other dependencies
        raise  # the commit failed: that is the request's answer


async def provide_clock(request: Request[Any, Any, Any]) -> Clock:
    return get_runtime(request).clock


async def provide_settings(request: Request[Any, Any, Any]) -> Settings:
    return get_runtime(request).settings


async def provide_secrets(request: Request[Any, Any, Any]) -> SecretBox:
    return get_runtime(request).secrets


async def provide_queue(request: Request[Any, Any, Any]) -> JobQueue:
    return get_runtime(request).queue


async def provide_guard(request: Request[Any, Any, Any]) -> AddressGuard:
    runtime = get_runtime(request)
    return shared_guard(runtime.resources, runtime.settings.integrations)


def paging(*, default: int = DEFAULT_PAGE_SIZE, maximum: int = MAX_PAGE_SIZE) -> Provide:
    """The ``paging`` dependency of a list serving ``default`` items a page, at most ``maximum``.

    The bounds are documented on the parameter and checked by :meth:`app.pagination.Paging.of`,
    so every list refuses a page size in the same words.
    """

    async def provide_paging(
        cursor: Cursor = None,
        limit: Annotated[
            int,
            QueryParameter(
                description=f"Items per page (1 to {maximum}).",
                schema_extra={"minimum": 1, "maximum": maximum},
            ),
        ] = default,
    ) -> PagingValue:
        return PagingValue.of(cursor, limit, maximum)

    return Provide(provide_paging)


DEPENDENCIES: dict[str, Provide] = {
    "session": Provide(provide_read_session),
    "uow": Provide(provide_unit_of_work),
    "clock": Provide(provide_clock),
    "settings": Provide(provide_settings),
    "secrets": Provide(provide_secrets),
    "job_queue": Provide(provide_queue),
    "guard": Provide(provide_guard),
    "paging": paging(),
}
"""The request-scoped dependencies every router offers its handlers."""

# The values are the process's own objects, not client input: nothing to validate (and the clock
# and the queue are protocols, which an instance check cannot test).
Reads = NamedDependency[SkipValidation[ReadSession]]
Writes = NamedDependency[SkipValidation[UnitOfWork]]
CurrentClock = NamedDependency[SkipValidation[Clock]]
CurrentSettings = NamedDependency[SkipValidation[Settings]]
Secrets = NamedDependency[SkipValidation[SecretBox]]
Queue = NamedDependency[SkipValidation[JobQueue]]
Guard = NamedDependency[SkipValidation[AddressGuard]]
Paging = NamedDependency[PagingValue]
