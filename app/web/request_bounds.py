"""Bounds every request meets before any handler decodes it (an ASGI middleware on the whole app).

* NUL characters — raw or escaped ``\\u0000`` — in the path, the query or a JSON/form body answer
  422: PostgreSQL refuses them in text, and no field of the API means them.
* A JSON body nested deeper than :data:`~app.web.input_guard.MAX_JSON_DEPTH` answers 422
  instead of exhausting the decoder's recursion.

The NUL and depth checks of bodies are :mod:`app.web.input_guard`'s; this applies them to every
request. The body is read once (at most ``MAX_BODY_BYTES``; larger ones pass unread to Litestar,
which answers 413) and handed on unchanged.

Integers in the path and the query are not checked here but after the caller is authenticated,
against the range of the column each one is looked up in (:mod:`app.web.id_bounds`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote_plus

import msgspec
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from app.errors import ValidationFailed
from app.web.input_guard import check_json


def _error(code: str, message: str, field: str | None) -> bytes:
    details = [{"field": field, "message": message}] if field else []
    return msgspec.json.encode({"code": code, "message": message, "details": details})


async def _answer(send: Send, status: int, body: bytes) -> None:
    start: Any = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _check_target(scope: Scope) -> tuple[int, bytes] | None:
    path = str(scope.get("path", ""))
    if "\x00" in path:
        return 422, _error("validation_failed", "NUL characters are not allowed", "path")
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    if not query:
        return None
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return 422, _error(
                "validation_failed", "NUL characters are not allowed", name or "query"
            )
    return None


def _check_body(body: bytes, content_type: str) -> tuple[int, bytes] | None:
    if not body:
        return None
    try:
        if "json" in content_type:
            check_json(body)
        elif b"\x00" in body or "\x00" in unquote_plus(body.decode("latin-1")):
            raise ValidationFailed.field("body", "must not contain NUL characters")
    except ValidationFailed as exc:
        return 422, msgspec.json.encode(
            {"code": exc.code, "message": exc.message, "details": exc.details}
        )
    return None


def request_bounds(max_body_bytes: int) -> Any:
    """The middleware; bodies over ``max_body_bytes`` are passed on unread (Litestar answers
    413 for them)."""

    def factory(app: ASGIApp) -> ASGIApp:
        return _middleware(app, max_body_bytes)

    return factory


def _middleware(app: ASGIApp, max_body_bytes: int) -> ASGIApp:
    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        refused = _check_target(scope)
        if refused is not None:
            await _answer(send, *refused)
            return
        headers = dict(scope.get("headers", []))
        content_type = headers.get(b"content-type", b"").decode("latin-1").lower()
        encoding = headers.get(b"content-encoding", b"identity").decode("latin-1").lower()
        # A compressed body (the SERP provider's gzip postbacks) is not the JSON its type names:
        # its receiver decompresses it and checks what it decoded.
        if encoding not in ("", "identity") or (
            "json" not in content_type and "x-www-form-urlencoded" not in content_type
        ):
            await app(scope, receive, send)
            return
        messages: list[Any] = []
        chunks: list[bytes] = []
        size = 0
        complete = False
        while size <= max_body_bytes:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if not message.get("more_body", False):
                complete = True
                break
        refused = _check_body(b"".join(chunks), content_type) if complete else None
        if refused is not None:
            await _answer(send, *refused)
            return
        replay = iter(messages)

        async def replayed() -> Any:
            try:
                return next(replay)
            except StopIteration:
                return await receive()

        await app(scope, replayed, send)

    return middleware
