"""``serve`` keeps an idle client connection open ``HTTP_KEEP_ALIVE_SECONDS`` (75 by default, not
uvicorn's 5): behind a proxy that reuses upstream connections idle for up to a minute, a server
closing first races the proxy's next request on that connection, which then fails (a 502)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app.__main__ import _serve
from app.settings import load_settings
from app.settings_fields import SettingsError
from app.settings_web import DEFAULT_HTTP_KEEP_ALIVE_SECONDS


def test_the_keep_alive_is_read_from_the_environment() -> None:
    assert load_settings({}).web.keep_alive_seconds == DEFAULT_HTTP_KEEP_ALIVE_SECONDS == 75
    for raw, seconds in (("1", 1), ("90", 90), (" 120 ", 120), ("3600", 3600)):
        assert load_settings({"HTTP_KEEP_ALIVE_SECONDS": raw}).web.keep_alive_seconds == seconds


@pytest.mark.parametrize("raw", ["0", "-5", "3601", "1.5", "", "forever"])
def test_a_keep_alive_out_of_range_or_not_whole_seconds_stops_the_start(raw: str) -> None:
    with pytest.raises(SettingsError, match="HTTP_KEEP_ALIVE_SECONDS"):
        load_settings({"HTTP_KEEP_ALIVE_SECONDS": raw})


async def test_serve_hands_the_keep_alive_to_uvicorn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole command up to the server's start (migrating a new SQLite file, building the
    app), then the configuration uvicorn builds from what ``serve`` passed it."""
    configs: list[uvicorn.Config] = []

    def run(app: Any, **options: Any) -> None:
        configs.append(uvicorn.Config(app, **options))

    monkeypatch.setattr(uvicorn, "run", run)
    settings = load_settings(
        {
            "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "KEY_FILE": str(tmp_path / "serve.key"),
            "HTTP_KEEP_ALIVE_SECONDS": "12",
        }
    )
    # In a thread of its own: the command runs its own event loop, as it does in production.
    assert await asyncio.to_thread(_serve, settings) == 0
    [config] = configs
    assert config.timeout_keep_alive == 12
