"""Sizes a reader can hold: no module in ``app/`` over 500 lines and no function over 80, so a
module keeps one job and a function one step. The simulators (``app/sandbox``, shipped only for
the demo and the tests) and the migrations (one generated revision a file) are outside the rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("collector_paused")

APP = Path(__file__).resolve().parents[1] / "app"
EXEMPT = ("sandbox/", "migrations/")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> list[tuple[str, str]]:
    return [
        (path.relative_to(APP).as_posix(), path.read_text())
        for path in sorted(APP.rglob("*.py"))
        if not path.relative_to(APP).as_posix().startswith(EXEMPT)
    ]


def test_no_module_is_over_500_lines() -> None:
    too_long = [
        f"{name} ({source.count(chr(10))} lines)"
        for name, source in _modules()
        if source.count("\n") > MAX_MODULE_LINES
    ]
    assert too_long == []


def test_no_function_is_over_80_lines() -> None:
    too_long = [
        f"{name}::{node.name} ({(node.end_lineno or node.lineno) - node.lineno + 1} lines)"
        for name, source in _modules()
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert too_long == []
