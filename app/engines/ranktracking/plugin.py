"""The Position tracking engine's jobs and sweeps (gathered in :mod:`.jobs`), as registered with
the process."""

from __future__ import annotations

from app.engines.plugin import EnginePlugin
from app.engines.ranktracking.jobs import JOBS, SWEEPS

PLUGIN = EnginePlugin(name="ranktracking", title="Position tracking", jobs=JOBS, sweeps=SWEEPS)
