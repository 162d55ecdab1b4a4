"""The listener ``METRICS_BIND`` asks ``serve`` for: ``GET /metrics`` alone, without the token
(PL-14).

Prometheus often scrapes over a network of its own; there the address is the credential, and the
public listener keeps its ``/metrics`` behind ``METRICS_TOKEN`` (or does not serve it at all). The
listener shares the process's runtime, so its figures are the public listener's. It answers
nothing else: every other path is 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST

from app.runtime import Runtime
from app.web.ops import scrape

log = logging.getLogger(__name__)

START_SECONDS = 10.0
"""How long starting the listener may take before ``serve`` gives up on it."""


def metrics_only_app(runtime: Runtime) -> Any:
    """An ASGI application answering ``GET /metrics`` (and ``HEAD``) and 404 to the rest."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/metrics" and scope["method"] in ("GET", "HEAD"):
            status, media_type, body = 200, CONTENT_TYPE_LATEST, await scrape(runtime)
        else:
            status, media_type, body = 404, "text/plain; charset=utf-8", b"Not found\n"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", media_type.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )

    return app


class _Server(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to the public listener's server,
    which stops this one as the application shuts down."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class MetricsListener:
    """The second listener, run on the public listener's event loop."""

    def __init__(self, runtime: Runtime, host: str, port: int) -> None:
        config = uvicorn.Config(
            metrics_only_app(runtime),
            host=host,
            port=port,
            lifespan="off",
            access_log=False,
            log_config=None,
            proxy_headers=False,
        )
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None
        self.where = f"{host}:{port}"

    async def start(self) -> None:
        """Listen; raises ``RuntimeError`` when the address cannot be bound."""
        self._task = asyncio.create_task(self._serve(), name="metrics-listener")
        async with asyncio.timeout(START_SECONDS):
            while not self._server.started:
                if self._task.done():
                    break
                await asyncio.sleep(0.01)
        if not self._server.started:
            await self.stop()
            raise RuntimeError(f"METRICS_BIND: could not listen on {self.where}")
        log.info("metrics listener on %s", self.where)

    async def _serve(self) -> None:
        try:
            await self._server.serve()
        except SystemExit:
            # uvicorn exits the process when it cannot bind; here that is start()'s error instead.
            log.error("metrics listener on %s stopped", self.where)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._task = None
