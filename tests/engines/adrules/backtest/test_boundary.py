"""AR-26 the backtest writes nothing by structure: the whole ``backtest`` package is under an
import-linter contract that keeps the Graph writer, the action runner and the record writers out
of it (checked on the real import graph by tests/test_import_contracts.py)."""

from __future__ import annotations

import tomllib

from tests.test_import_contracts import PYPROJECT


def test_ar26_the_backtest_package_cannot_reach_a_writer() -> None:
    config = tomllib.loads(PYPROJECT.read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if "backtest writes nothing" in c["name"]
    ]
    assert contract["source_modules"] == ["app.engines.adrules.backtest"]
    assert {
        "app.integrations.meta.writer",
        "app.engines.adrules.work.execute",
        "app.engines.adrules.records",
    } <= set(contract["forbidden_modules"])
