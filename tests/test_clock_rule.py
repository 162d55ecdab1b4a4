"""Time is read in one place, ``app/clock.py``: everything else asks the Clock it is handed for
the time and for durations, so a test on a ManualClock decides when a cache entry expires, a
retry happens or a drain runs out of time. The rule is ruff's banned-API check (``TID251``,
configured in ``pyproject.toml``); it runs here on the real code, so a clock read slipped into
``app/`` fails the suite itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
