"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response, get
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.web.auth import get_runtime


@get("/health", media_type=MediaType.JSON, include_in_schema=True, sync_to_thread=False)
def health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@get("/ready", media_type=MediaType.JSON)
async def ready(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """The database and the queue answer. Reports the platform-wide stop too."""
    runtime = get_runtime(request)
    database = await runtime.db.ping()
    queue = await runtime.queue.ping()
    ok = database and queue
    body = {
        "status": "ready" if ok else "unavailable",
        "database": database,
        "queue": queue,
        "queue_backend": runtime.queue.backend,
        "platform_stop": runtime.platform_stopped(),
    }
    return Response(body, status_code=200 if ok else 503)


@get("/metrics", media_type=CONTENT_TYPE_LATEST, sync_to_thread=False)
def metrics() -> Response[bytes]:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


ROUTES = [health, ready, metrics]
