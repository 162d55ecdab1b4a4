"""Composition root: the engines plugged into a runtime. The only module that knows all engines
besides the web layer."""

from __future__ import annotations

from app.clock import Clock
from app.db.session import Database
from app.engines.adrules.plugin import PLUGIN as ADRULES
from app.engines.funnels.plugin import PLUGIN as FUNNELS
from app.engines.plugin import EnginePlugin
from app.engines.ranktracking.plugin import PLUGIN as RANKTRACKING
from app.runtime import Runtime, build_runtime
from app.scheduling.housekeeping import HOUSEKEEPING_SWEEPS
from app.settings import Settings

PLUGINS: list[EnginePlugin] = [ADRULES, FUNNELS, RANKTRACKING]


def assemble(
    settings: Settings, clock: Clock | None = None, *, db: Database | None = None
) -> Runtime:
    """A runtime with every engine's jobs and sweeps registered."""
    runtime = build_runtime(settings, clock, db=db)
    runtime.add_sweeps(HOUSEKEEPING_SWEEPS)
    for plugin in PLUGINS:
        runtime.add_jobs(plugin.jobs)
        runtime.add_sweeps(plugin.sweeps)
    return runtime
