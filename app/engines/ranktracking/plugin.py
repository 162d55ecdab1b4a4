"""The Position tracking engine's jobs, sweeps and demo data, as registered with the process."""

from __future__ import annotations

from app.engines.plugin import EnginePlugin

PLUGIN = EnginePlugin(name="ranktracking", title="Position tracking")
