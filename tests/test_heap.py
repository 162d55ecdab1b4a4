"""A started process leaves its start-up heap out of the collector's full collections
(:mod:`app.heap`): the helper itself, ``HEAP_FREEZE=off`` leaving it to the collector, and
``python -m app serve`` calling it once started (that real process also shows its
``HTTP_KEEP_ALIVE_SECONDS`` on a real connection). The worker process is tested with the other
worker processes (tests/scheduling/test_worker_heap.py)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from app.heap import freeze_startup_heap, settle_startup_heap
from app.settings import load_settings
from app.settings_fields import SettingsError
from app.web.app import create_app
from app.wiring import assemble
from tests.conftest import eventually

REPO = Path(__file__).resolve().parents[1]


def test_what_is_alive_after_start_up_is_left_out_of_collections() -> None:
    try:
        frozen = freeze_startup_heap()
        # Frozen objects can still be freed (another thread's, a cycle-free temporary) between
        # the freeze and this read: the count can only have shrunk.
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual


def test_the_freeze_is_on_unless_heap_freeze_says_off() -> None:
    assert load_settings({}).process.heap_freeze is True
    for raw in ("1", "true", "yes", "on", "TRUE"):
        assert load_settings({"HEAP_FREEZE": raw}).process.heap_freeze is True
    for raw in ("0", "false", "no", "off", "Off", ""):
        assert load_settings({"HEAP_FREEZE": raw}).process.heap_freeze is False
    with pytest.raises(SettingsError, match="HEAP_FREEZE"):
        load_settings({"HEAP_FREEZE": "sometimes"})


def test_with_the_freeze_off_nothing_is_frozen(caplog: pytest.LogCaptureFixture) -> None:
    assert gc.get_freeze_count() == 0
    with caplog.at_level(logging.INFO, logger="app.heap"):
        assert settle_startup_heap(freeze=False) == 0
    assert gc.get_freeze_count() == 0
    assert "HEAP_FREEZE is off" in caplog.text


async def test_a_served_app_with_the_freeze_off_freezes_nothing(tmp_path: Path) -> None:
    """The app ``serve`` builds (``serving=True``, its own runtime) honours ``HEAP_FREEZE``; with
    the freeze on, its start is the real process's test below (a test session's heap is not to
    be frozen)."""
    settings = load_settings(
        {
            "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "KEY_FILE": str(tmp_path / "serve.key"),
            "HEAP_FREEZE": "off",
        }
    )
    app = create_app(settings, assemble(settings), background=False, serving=True)
    assert gc.get_freeze_count() == 0
    try:
        async with AsyncTestClient(app) as client:  # the lifespan has started
            assert gc.get_freeze_count() == 0
            assert (await client.get("/health")).status_code == 200
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()  # should it ever freeze, the rest of the session still collects as usual


@pytest.mark.slow
async def test_the_served_process_freezes_its_heap_and_closes_its_runtime(tmp_path: Path) -> None:
    """``serve`` hands its own runtime to the app; the freeze once started, and the runtime's
    close when stopped, must not depend on the app building one. Closed, every database
    connection is: SQLite then folds its write-ahead log into the file and removes it. The same
    process, started with a 1-second keep-alive, closes an idle connection after that second,
    not after uvicorn's 5."""
    log_path = tmp_path / "serve.log"
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEMO"}},
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
        "KEY_FILE": str(tmp_path / "serve.key"),
        "HOST": "127.0.0.1",
        "PORT": "0",  # an ephemeral port, read back from uvicorn's log line
        "LOG_LEVEL": "INFO",
        "HTTP_KEEP_ALIVE_SECONDS": "1",
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        async def started_or_exited() -> bool:
            # uvicorn says where it listens once the app's lifespan, where the freeze is, has
            # started (its "Application startup complete" comes a moment before that line).
            started = "Uvicorn running on" in log_path.read_text()
            return started or process.poll() is not None

        # A real process migrating a new database and importing everything: on a loaded machine
        # that took more than a minute.
        await eventually(started_or_exited, timeout=180, interval=0.2)
        assert process.poll() is None, log_path.read_text()
        listening = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", log_path.read_text())
        assert listening is not None, log_path.read_text()
        idle_for = await _seconds_until_an_idle_connection_is_closed(int(listening[1]))
        # After the second it was told (the timer starts as the answer is sent, a moment before
        # it is read here), well before uvicorn's default 5 s.
        assert 0.5 <= idle_for < 4.5, idle_for
    finally:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 40)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
    frozen = re.search(r"start-up heap frozen: (\d+) objects", log_path.read_text())
    assert frozen is not None, log_path.read_text()
    assert int(frozen[1]) > 0
    assert "Application shutdown complete" in log_path.read_text()
    assert (tmp_path / "serve.db").exists()
    assert not (tmp_path / "serve.db-wal").exists(), log_path.read_text()


async def _seconds_until_an_idle_connection_is_closed(port: int) -> float:
    """Send one request on a kept-alive HTTP/1.1 connection, then wait for the server to close
    it; how long it stayed open, idle, after the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 200"), head
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        assert length is not None, head
        await reader.readexactly(int(length[1]))
        idle_since = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 30) == b"", "the server sent more"
        return time.monotonic() - idle_since
    finally:
        writer.close()
