"""The architecture's rules are import-linter contracts in ``pyproject.toml``: the engines stay
independent, the core never reaches the engines or the web layer, the ad-rules dispatcher and
preview cannot write to Meta, and nothing but the demo composition imports the simulators. Every
contract is checked here on the real import graph, so a broken boundary fails the suite itself."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"


def contract_names() -> list[str]:
    config = tomllib.loads(PYPROJECT.read_text())
    return [contract["name"] for contract in config["tool"]["importlinter"]["contracts"]]


def test_the_project_declares_its_boundaries() -> None:
    names = contract_names()
    assert any("simulators" in name for name in names)
    assert any("Engines do not import each other" in name for name in names)


def test_the_ad_rules_claim_stage_is_covered_whole() -> None:
    """AR-19 names the claim stage's package, not its modules one by one, so a module added to
    ``claim/`` is inside the contract from its first line."""
    config = tomllib.loads(PYPROJECT.read_text())
    (contract,) = [
        c for c in config["tool"]["importlinter"]["contracts"] if "cannot change an ad" in c["name"]
    ]
    assert "app.engines.adrules.claim" in contract["source_modules"]
    assert "app.engines.adrules.work.execute" in contract["forbidden_modules"]


def test_every_import_contract_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # import-linter resolves the root package from the working directory
    configure()  # what the `lint-imports` command does first: register its readers and graph
    kept = lint_imports(config_filename=str(PYPROJECT), cache_dir=None, no_logo=True)
    assert kept, "an import-linter contract is broken: run `lint-imports` for the chain"
