"""Every engine has the modules ``docs/architecture.md`` names beside its stages: ``models.py``,
``schemas.py``, ``errors.py``, ``jobs.py``, ``plugin.py`` and ``deps.py``; and what its plugin
registers is what its ``jobs.py`` gathers."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest

import app.engines
from app.engines.ranktracking import jobs as ranktracking_jobs
from app.engines.ranktracking.plugin import PLUGIN as RANKTRACKING

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


CAMPAIGNS = Path(app.engines.__path__[0]) / "funnels" / "campaigns"
STAGES = ("due", "claim", "work", "records")
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
