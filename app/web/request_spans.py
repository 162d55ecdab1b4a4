"""A server span for every HTTP request, when tracing is on (:mod:`app.telemetry`).

The application's outermost middleware; ``create_app`` adds it only when tracing is on, so a
process that does not trace pays nothing per request. The span is named by the route's template
(``GET /api/v1/adrules/rules/{rule_id:int}``), never by the path: a path can carry a token (an
unsubscribe link, a tracking pixel). A request that brings a W3C ``traceparent`` continues its
caller's trace. Litestar runs application middleware once a route matched, so a path no route
serves (a 404 from the router) has no span.
"""

from __future__ import annotations

from collections.abc import Callable

from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry.trace import SpanKind, Status, StatusCode

from app import telemetry


def request_spans() -> Callable[[ASGIApp], ASGIApp]:
    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            active = telemetry.tracer()
            if active is None or scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            method = scope["method"]
            route = scope.get("path_template") or ""
            status = 500

            async def send_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            # Not telemetry.span: an HTTPException raised through here is an answer (a 403, a
            # 413), not a failure of the server; only a 5xx marks the span failed.
            with active.start_as_current_span(
                f"{method} {route}".strip(),
                context=telemetry.parent(_traceparent(scope)),
                kind=SpanKind.SERVER,
                attributes={
                    "http.request.method": method,
                    "http.route": route,
                    "url.scheme": scope.get("scheme", "http"),
                },
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                try:
                    await app(scope, receive, send_status)
                except HTTPException as exc:
                    # Raised by a middleware inside this one (CSRF 403, 413): the exception
                    # handler outside answers with its status.
                    status = exc.status_code
                    raise
                except Exception as exc:
                    telemetry.fail(span, exc)
                    raise
                finally:
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))

        return middleware

    return wrap


def _traceparent(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"traceparent":
            return value.decode("latin-1")
    return None
