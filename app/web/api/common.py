"""Router factory shared by every API module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Router
from litestar.di import Provide

from app.web.auth import api_principal, provide_runtime


def api_router(path: str, handlers: Sequence[Any], *, tag: str | None = None) -> Router:
    """A router under ``/api/v1{path}`` whose handlers may take ``principal: CurrentPrincipal``
    (the API key's workspace) and ``runtime: CurrentRuntime``."""
    return Router(
        path=f"/api/v1{path}",
        route_handlers=list(handlers),
        dependencies={
            "principal": Provide(api_principal),
            "runtime": Provide(provide_runtime),
        },
        tags=[tag or path.strip("/") or "platform"],
    )
