"""No body on a 204 or a 304 (RFC 9110 §15.3.5, §15.4.5), whatever the handler returned.

A ``before_send`` hook on the application, so it covers every route alike: Litestar handlers,
the bare ASGI receivers (:mod:`app.web.receivers`), exception handlers and middleware. A body on
such a status is not just wasted bytes: the client reads the response as ending at its headers,
so the stray bytes are taken as the start of the next response on a kept-alive connection
(``nullHTTP/1.1 202 …``), which corrupts it. The hook drops ``content-length`` (and any
``transfer-encoding``) from the start message and empties every body message that follows.
"""

from __future__ import annotations

from typing import Any, cast

from litestar.types import Message, Scope

EMPTY_STATUSES = frozenset({204, 304})
_FRAMING = frozenset({b"content-length", b"transfer-encoding"})
_MARK = "sweepline.empty_status"
"""Set in the request's scope once its response started with an empty status."""


async def no_body_on_empty_statuses(message: Message, scope: Scope) -> None:
    """The ``before_send`` hook."""
    # The ASGI messages are TypedDicts of a union; each branch below reads one kind only.
    sent = cast(dict[str, Any], message)
    marks = cast(dict[str, Any], scope)
    kind = sent["type"]
    if kind == "http.response.start":
        if sent["status"] in EMPTY_STATUSES:
            marks[_MARK] = True
            sent["headers"] = [h for h in sent.get("headers", ()) if h[0].lower() not in _FRAMING]
    elif kind == "http.response.body" and marks.get(_MARK):
        sent["body"] = b""
