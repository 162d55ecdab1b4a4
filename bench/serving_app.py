"""ASGI app factories for ``bench/serving_stack.py``: each server process imports one of them, so
uvicorn and granian serve exactly the same application. Configured by the environment the
benchmark sets (``DATABASE_URL`` and the rest, as ``python -m app serve`` reads them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litestar import Litestar, get, post

from app.settings import load_settings
from app.web.app import create_app


def hello() -> Litestar:
    @post("/hello", status_code=202, sync_to_thread=False)
    def hello_post() -> dict[str, str]:
        return {"hello": "world"}

    @get("/health", sync_to_thread=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return Litestar(route_handlers=[hello_post, health], logging_config=None)


def sweepline() -> Any:
    """The whole application as ``serve`` builds it, without sweepers or workers."""
    return create_app(load_settings(os.environ), background=False)
