"""Time is read in one place, ``app/clock.py``: everything else asks the Clock it is handed for
the time and for durations, so a test on a ManualClock decides when a cache entry expires, a
retry happens or a drain runs out of time. The rule is ruff's banned-API check (``TID251``,
configured in ``pyproject.toml``); it runs here on the real code, so a clock read slipped into
``app/`` fails the suite itself.

The event loop has a clock of its own (``loop.time()``) that the banned-API check cannot see: it is
a method of an object, not a name to import. :func:`event_loop_clock_reads` finds those reads, and
``app/clock.py`` holds the one that is allowed (``loop_time``: the time base of ``call_at``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("collector_paused")

REPO = Path(__file__).resolve().parents[1]


def _ruff(*args: str, source: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "TID251", "--no-cache", *args],
        cwd=REPO,
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )


def test_nothing_in_app_reads_the_time_but_the_clock() -> None:
    found = _ruff("app")
    assert found.returncode == 0, found.stdout


@pytest.mark.parametrize(
    "read",
    [
        "time.monotonic()",
        "time.perf_counter()",
        "time.time()",
        "datetime.now(UTC)",
        "date.today()",
    ],
)
def test_a_clock_read_outside_the_clock_module_is_refused(read: str) -> None:
    module = f"import time\nfrom datetime import UTC, date, datetime\n\nprint({read})\n"
    found = _ruff("--stdin-filename", "app/engines/example.py", "-", source=module)
    assert found.returncode == 1
    assert "TID251" in found.stdout


def test_the_clock_module_reads_the_time() -> None:
    module = "import time\n\nprint(time.monotonic())\n"
    found = _ruff("--stdin-filename", "app/clock.py", "-", source=module)
    assert found.returncode == 0, found.stdout


def _is_event_loop(node: ast.expr) -> bool:
    """``loop``, ``self._loop``, ``asyncio.get_running_loop()``, ``get_event_loop()``: the event
    loop by the names this code base gives it."""
    if isinstance(node, ast.Call):
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        return name in {"get_running_loop", "get_event_loop"}
    if isinstance(node, ast.Name):
        return node.id.lower().endswith("loop")
    if isinstance(node, ast.Attribute):
        return node.attr.lower().endswith("loop")
    return False


def event_loop_clock_reads(source: str) -> list[int]:
    """The lines of ``source`` that read the event loop's clock (``<loop>.time()``)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "time"
        and not node.args
        and _is_event_loop(node.func.value)
    ]


def test_nothing_in_app_reads_the_event_loop_clock_but_the_clock() -> None:
    found = {
        f"{path.relative_to(REPO)}:{line}"
        for path in (REPO / "app").rglob("*.py")
        if path != REPO / "app" / "clock.py"
        for line in event_loop_clock_reads(path.read_text())
    }
    assert not found, f"read the loop's clock through app.clock.loop_time: {sorted(found)}"


@pytest.mark.parametrize(
    "read",
    [
        "loop.time()",
        "self._loop.time()",
        "asyncio.get_running_loop().time()",
        "asyncio.get_event_loop().time()",
        "get_running_loop().time()",
    ],
)
def test_an_event_loop_clock_read_is_found(read: str) -> None:
    assert event_loop_clock_reads(f"x = 1\nprint({read})\n") == [2]


@pytest.mark.parametrize("other", ["local.time()", "moment.time()", "loop.time(3)", "clock.now()"])
def test_a_time_of_day_is_not_an_event_loop_clock_read(other: str) -> None:
    """``datetime.time()`` of a local moment is a time of day, not a clock read."""
    assert event_loop_clock_reads(f"print({other})\n") == []
