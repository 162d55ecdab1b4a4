"""``serve`` and ``worker`` run on one kind of event loop, uvloop (installed with
``uvicorn[standard]``): the worker's mail, database and Redis conversations on the loop the API's
are on, not on the standard library's slower one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvloop

import app.__main__ as cli
from app import event_loop
from app.settings import Settings


def _environment(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    monkeypatch.setenv("DATABASE_URL", settings.database.url)
    monkeypatch.setenv("ENCRYPTION_KEY", settings.security.encryption_key)
    monkeypatch.setenv("SESSION_SECRET", settings.web.session_secret)
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    monkeypatch.delenv("REDIS_URL", raising=False)


def test_run_runs_the_coroutine_on_uvloop() -> None:
    async def loop_kind() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    assert event_loop.run(loop_kind()) is uvloop.Loop


def test_the_worker_command_runs_on_uvloop(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    _environment(monkeypatch, settings)
    seen: list[type[asyncio.AbstractEventLoop]] = []

    async def worker(_settings: Settings) -> int:
        seen.append(type(asyncio.get_running_loop()))
        return 0

    monkeypatch.setattr(cli, "_worker", worker)
    assert cli.main(["worker"]) == 0
    assert seen == [uvloop.Loop]


def test_serve_tells_uvicorn_the_same_loop(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    import uvicorn

    _environment(monkeypatch, settings)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append(options))
    assert cli.main(["serve"]) == 0
    assert [options["loop"] for options in calls] == ["uvloop"]
    assert event_loop.UVICORN_LOOP == "uvloop"
