"""No engine branches on the SQL dialect: ``.ci/dialect_lint.py`` (run by ``make lint``) refuses a
dialect test in ``app/engines``; the per-dialect SQL lives in ``app/db``. It runs here on the real
tree and on injected violations."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINTER = REPO / ".ci" / "dialect_lint.py"


def _lint(*args: str, source: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LINTER), *args],
        cwd=REPO,
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )


def test_no_engine_tests_the_dialect() -> None:
    found = _lint()
    assert found.returncode == 0, found.stdout


@pytest.mark.parametrize(
    "module",
    [
        "def size(db):\n    return 200 if db.is_postgres else 10\n",
        "def name(session):\n    return session.bind.dialect.name\n",
        "from sqlalchemy.dialects import postgresql\n",
        "from sqlalchemy.dialects.sqlite import insert\n",
        "from app.db.dialect import is_postgres\n",
        "from app.db.dialect import POSTGRESQL\n",
    ],
)
def test_a_dialect_test_in_an_engine_is_refused(module: str) -> None:
    found = _lint("--as", "app/engines/funnels/example.py", "-", source=module)
    assert found.returncode == 1
    assert "app/engines/funnels/example.py:" in found.stdout


def test_the_dialect_helpers_of_app_db_are_allowed() -> None:
    module = "from app.db.dialect import concurrent_writers, insert, row_count, upsert\n"
    found = _lint("--as", "app/engines/funnels/example.py", "-", source=module)
    assert found.returncode == 0, found.stdout


def test_the_linter_runs_with_the_other_linters() -> None:
    assert "dialect_lint.py" in (REPO / "Makefile").read_text()
