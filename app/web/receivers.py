"""Receivers: routes written as bare ASGI handlers, for the endpoints that take events by the
thousand a second.

A Litestar route handler spends about 50 µs of CPU per request before and after the handler's own
work (the request object, the signature model and its keyword arguments, the response object and
its conversion to ASGI messages): more than storing the event costs. A receiver goes without them.
It reads the whole body, gives the handler the runtime, the raw headers and the body, and encodes
the handler's msgspec answer itself.

It is still a route of the application, so everything around a handler applies unchanged: the
request id and the access log, the request bounds (NUL characters, JSON depth), the CSRF exemption
of ``/hooks/``, the access rule its router declares (:func:`app.web.access.verify_routes` checks
receivers too), the exception handlers — a raised :class:`~app.errors.DomainError` answers as it
does anywhere else — and the security headers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import msgspec
from litestar.enums import ScopeType
from litestar.exceptions import InternalServerException, MethodNotAllowedException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send

from app.runtime import Runtime


class HeaderLookup(Protocol):
    """A request's headers by name: :class:`RawHeaders`, or Litestar's ``request.headers``."""

    def get(self, name: str, /) -> str | None: ...


class RawHeaders:
    """The request's headers by name, as ASGI servers give them (names in lower case); the first
    of repeated headers counts, as with Litestar's ``request.headers``."""

    __slots__ = ("_values",)

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self._values = dict(reversed(list(raw)))

    def get(self, name: str, /) -> str | None:
        value = self._values.get(name.encode("latin-1"))
        return None if value is None else value.decode("latin-1")


class Incoming:
    """What a receiver is given: the runtime, the request's headers and its whole body."""

    __slots__ = ("body", "headers", "runtime")

    def __init__(self, runtime: Runtime, headers: RawHeaders, body: bytes) -> None:
        self.runtime = runtime
        self.headers = headers
        self.body = body


Handler = Callable[[Incoming], Awaitable[msgspec.Struct | None]]


class ReceiverRoute(ASGIRouteHandler):
    """The route of a receiver; ``http_methods`` and ``status_code`` as an HTTP route handler has
    them, so the access rules and the route listings treat both alike."""

    __slots__ = ("http_methods", "status_code")

    def __init__(self, path: str, *, method: str, status_code: int) -> None:
        super().__init__(path, copy_scope=False)
        self.http_methods = frozenset({method})
        self.status_code = status_code


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole body, or 413 once it grows past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Any = await receive()
        if message["type"] == "http.disconnect":
            raise InternalServerException("client disconnected prematurely")
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestEntityTooLarge()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_JSON = msgspec.json.Encoder()
_JSON_TYPE = (b"content-type", b"application/json")
_NO_CONTENT: Any = [(b"content-length", b"0")]


def _start(status: int, answer: bytes | None) -> Any:
    headers = (
        _NO_CONTENT
        if answer is None
        else [_JSON_TYPE, (b"content-length", str(len(answer)).encode())]
    )
    return {"type": "http.response.start", "status": status, "headers": headers}


def receiver(
    path: str, *, status_code: int, method: str = "POST"
) -> Callable[[Handler], ReceiverRoute]:
    """Make ``handle`` the receiver of ``method`` requests to ``path``, answering its result as
    JSON with ``status_code`` (no body when it returns None); any other method answers 405."""

    def decorate(handle: Handler) -> ReceiverRoute:
        allow = {"Allow": method}

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP or scope["method"] != method:
                raise MethodNotAllowedException(headers=allow)
            runtime: Runtime = scope["app"].state.runtime
            body = await read_body(receive, runtime.settings.web.max_body_bytes)
            result = await handle(Incoming(runtime, RawHeaders(scope["headers"]), body))
            # None is no body at all, not the JSON ``null``.
            answer = None if result is None else _JSON.encode(result)
            await send(_start(status_code, answer))
            await send({"type": "http.response.body", "body": answer or b"", "more_body": False})

        serve.__name__ = serve.__qualname__ = handle.__name__
        serve.__doc__ = handle.__doc__
        return ReceiverRoute(path, method=method, status_code=status_code)(serve)

    return decorate
