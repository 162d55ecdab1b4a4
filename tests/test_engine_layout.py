"""Every engine has the modules ``docs/architecture.md`` names beside its stages: ``models.py``,
``schemas.py``, ``errors.py``, ``jobs.py``, ``plugin.py`` and ``deps.py``; what its plugin
registers is what its ``jobs.py`` gathers; and the funnel run pipeline is split by stage (``due/``,
``claim/``, ``work/``, ``records/``)."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import app.engines
from app.engines.ranktracking import jobs as ranktracking_jobs
from app.engines.ranktracking.plugin import PLUGIN as RANKTRACKING

pytestmark = pytest.mark.usefixtures("collector_paused")

ENGINES = sorted(m.name for m in pkgutil.iter_modules(app.engines.__path__) if m.ispkg)
EVERY_ENGINE_HAS = ("models.py", "schemas.py", "errors.py", "jobs.py", "plugin.py", "deps.py")


def test_the_three_engines_are_found() -> None:
    assert ENGINES == ["adrules", "funnels", "ranktracking"]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_has_the_named_modules(engine: str) -> None:
    package = Path(app.engines.__path__[0]) / engine
    assert [name for name in EVERY_ENGINE_HAS if not (package / name).is_file()] == []


def test_rank_tracking_registers_what_its_jobs_module_gathers() -> None:
    assert RANKTRACKING.jobs == ranktracking_jobs.JOBS
    assert RANKTRACKING.sweeps == ranktracking_jobs.SWEEPS
    names = {spec.name for spec in RANKTRACKING.jobs}
    assert {"ranktracking.post_tasks", "ranktracking.alert_deliver"} <= names


OUTBOX = Path(app.engines.__path__[0]) / "funnels" / "outbox"
STAGES = ("due", "claim", "work", "records")
OUTBOX_BESIDE_THE_STAGES = {"__init__.py", "states.py", "payloads.py", "channel.py"}
"""The outbox's modules outside its stages: its states and the contract between the two sides
(the payload structs, what a channel is handed)."""


def test_the_outbox_is_split_by_stage() -> None:
    """The funnel outbox has the four stage packages, and beside them only its states and its
    contract: a new module goes into the stage whose job it does."""
    assert [s for s in STAGES if not (OUTBOX / s / "__init__.py").is_file()] == []
    beside = {p.name for p in OUTBOX.glob("*.py")}
    assert beside - OUTBOX_BESIDE_THE_STAGES == set()
    assert {p.name for p in OUTBOX.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(
        STAGES
    )


RUNS = Path(app.engines.__path__[0]) / "funnels" / "runs"


def test_funnel_runs_are_split_by_stage() -> None:
    """Beside its states, the run pipeline holds nothing but its four stages."""
    assert sorted(p.name for p in RUNS.glob("*.py")) == ["__init__.py", "states.py"]
    assert sorted(p.name for p in RUNS.iterdir() if p.is_dir() and p.name != "__pycache__") == (
        sorted(STAGES)
    )


@pytest.mark.parametrize("stage", STAGES)
def test_each_runs_stage_names_its_modules(stage: str) -> None:
    """A stage's docstring says what each of its modules is for."""
    package = RUNS / stage
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    modules = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    modules += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    assert modules
    assert [m for m in modules if f"``{m}``" not in docstring] == []


CAMPAIGNS = Path(app.engines.__path__[0]) / "funnels" / "campaigns"
CAMPAIGNS_ROOT = (
    "__init__.py",
    "jobs.py",
    "models.py",
    "recipient_states.py",
    "review.py",
    "service.py",
    "states.py",
)
"""Beside its stages, the campaigns package keeps its tables and states, the lifecycle service,
the thin jobs and the review; everything else lives in the stage it belongs to."""


def test_funnel_campaigns_are_split_by_stage() -> None:
    stages = {
        stage: sorted(p.name for p in (CAMPAIGNS / stage).glob("*.py") if p.name != "__init__.py")
        for stage in STAGES
        if (CAMPAIGNS / stage / "__init__.py").is_file()
    }
    assert sorted(stages) == sorted(STAGES)
    assert [stage for stage, modules in stages.items() if not modules] == []
    assert sorted(p.name for p in CAMPAIGNS.glob("*.py")) == sorted(CAMPAIGNS_ROOT)
