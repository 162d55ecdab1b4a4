"""A span for every outbound HTTP call, when tracing is on (:mod:`app.telemetry`).

Both clients of the outbound core (:func:`~app.integrations.http_guard.outbound_client` and
:class:`~app.integrations.http_guard.GuardedHttp`) are :class:`TracedClient` s. A span says the
method, the host and port called, the provider and the answer's status — not the path or the
query, which can carry tokens (a Graph paging link carries the access token) or a user's data.
Nothing is added to the request: the trace context stays inside the product.
"""

from __future__ import annotations

from typing import Any

import httpx
from opentelemetry.trace import SpanKind, Status, StatusCode

from app import telemetry


class TracedClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose every request (each retry its own) is a client span."""

    def __init__(self, *, provider: str, **options: Any) -> None:
        super().__init__(**options)
        self.provider = provider

    async def send(self, request: httpx.Request, **options: Any) -> httpx.Response:
        if not telemetry.enabled():
            return await super().send(request, **options)
        with telemetry.span(
            request.method,
            kind=SpanKind.CLIENT,
            attributes=lambda: _request_attributes(request, self.provider),
        ) as span:
            response = await super().send(request, **options)
            if span is not None:
                span.set_attribute("http.response.status_code", response.status_code)
                if response.status_code >= 400:
                    span.set_attribute("error.type", str(response.status_code))
                    span.set_status(Status(StatusCode.ERROR))
            return response


def _request_attributes(request: httpx.Request, provider: str) -> dict[str, Any]:
    url = request.url
    # A pinned request (GuardedHttp) goes to the checked IP address with the name in its Host
    # header: the name is the server, the IP the peer.
    server = _host_name(request.headers.get("host", "")) or url.host
    attributes: dict[str, Any] = {
        "http.request.method": request.method,
        "server.address": server,
        "server.port": url.port or (443 if url.scheme == "https" else 80),
        "url.scheme": url.scheme,
        "sweepline.provider": provider,
    }
    if server != url.host:
        attributes["network.peer.address"] = url.host
    return attributes


def _host_name(header: str) -> str:
    """The name of a ``Host`` header, without its port (``[::1]:8080`` → ``::1``)."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.partition(":")[0]
