"""Demo mode as ``make run`` starts it (a real ``serve`` process): a variable the user set wins over
its simulator, the banner says what is simulated and shows the credentials at every start, and
the app's logging (secret masking) holds although simulators run in the process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from app.sandbox.base import ThreadedServer, free_port
from app.sandbox.serp import SerpSimulator

pytestmark = pytest.mark.slow

RAW_KEY = "swl_" + "k" * 40


class Output:
    """What a process writes, read as it comes (a test waits for a line, not for a guess)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 30) -> None:
        """Until a line containing ``text`` was written (the assertions after say if it never
        was)."""
        with self._changed:
            self._changed.wait_for(lambda: any(text in line for line in self._lines), timeout)

    def text(self) -> str:
        self._reader.join(timeout=10)
        with self._changed:
            return "".join(self._lines)


def _start(tmp_path: Path, port: int, serp_url: str) -> subprocess.Popen[str]:
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}},
        "DEMO": "1",
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}",
        "KEY_FILE": str(tmp_path / "demo.key"),
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "SERP_URL": serp_url,
        "SERP_LOGIN": "real-login",
        "SERP_PASSWORD": "real-password",
        "LOG_LEVEL": "INFO",
    }
    env.pop("PUBLIC_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "app", "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_ready(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert process.poll() is None, "serve exited"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    pytest.fail("the demo did not become ready")


def _stop(process: subprocess.Popen[str], output: Output) -> str:
    process.terminate()
    try:
        process.wait(timeout=40)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return output.text()


def test_an_explicit_serp_url_wins_and_masking_holds_in_demo_mode(tmp_path: Path) -> None:
    provider = SerpSimulator(login="real-login", password="real-password", ready_after_polls=1)
    server = ThreadedServer(provider.app).start()
    port = free_port()
    process = _start(tmp_path, port, server.url)
    output = Output(process)
    try:
        _wait_ready(port, process)
        # The demo's schedules measure their baseline at the provider the user named.
        deadline = time.monotonic() + 60
        while provider.count("serp.task_post") == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the demo process's first call
        # A request whose path carries an API key: its access-log line must be masked.
        answer = httpx.put(f"http://127.0.0.1:{port}/api/v1/secrets/{RAW_KEY}", json={})
        assert answer.status_code == 401
        # The access-log line is written after the answer was sent, in the other process.
        output.wait_for("/api/v1/secrets/")
    finally:
        first_log = _stop(process, output)
    assert provider.state.calls["serp.task_post"] >= 1, first_log
    assert "Real outside APIs (set explicitly): serp (SERP_URL)" in first_log
    simulated = re.search(r"Simulated outside APIs: (.*)", first_log)
    assert simulated is not None
    assert "serp" not in simulated.group(1).split(", ")
    assert "meta" in simulated.group(1)
    assert RAW_KEY not in first_log
    assert "swl_***" in first_log
    password = re.search(r"password: (\S+)", first_log)
    assert password is not None

    # The credentials are shown again at the next start.
    process = _start(tmp_path, port, server.url)
    output = Output(process)
    try:
        _wait_ready(port, process)
    finally:
        second_log = _stop(process, output)
        server.stop()
    assert f"password: {password.group(1)}" in second_log
