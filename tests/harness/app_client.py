"""An HTTP client on an app built for settings of its own: how a test runs the product with a
setting changed (a metrics token left out, a queue pointed at a Redis that never answers), rather
than patching a setting into a running app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from litestar import Litestar

from app.clock import Clock
from app.settings import Settings
from app.wiring import assemble


def asgi_transport(app: Litestar) -> httpx.ASGITransport:
    """httpx's in-process transport on ``app``. Litestar types its ASGI entry point with its own
    scope and event types, narrower than the plain mappings httpx's parameter names: the one
    place that says they fit."""
    return httpx.ASGITransport(app=app)  # type: ignore[arg-type]


@asynccontextmanager
async def app_client(settings: Settings, clock: Clock) -> AsyncIterator[httpx.AsyncClient]:
    """A client on a runtime and app of their own for ``settings`` (no background workers; its own
    connection pool), closed after."""
    from app.web.app import create_app

    runtime = assemble(settings, clock)
    app = create_app(settings, runtime, background=False)
    try:
        async with httpx.AsyncClient(
            transport=asgi_transport(app), base_url="http://testserver"
        ) as client:
            yield client
    finally:
        await runtime.aclose()
