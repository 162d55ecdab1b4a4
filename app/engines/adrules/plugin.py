"""The Ad rules engine's jobs, sweeps and demo data, as registered with the process."""

from __future__ import annotations

from app.engines.adrules.demo import seed_demo
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.adrules.sweep import DISPATCH_SWEEP
from app.engines.plugin import EnginePlugin
from app.sandbox.meta.demo import start_demo_sandbox, start_demo_sheets_sandbox

PLUGIN = EnginePlugin(
    name="adrules",
    title="Ad rules",
    jobs=[RUN_ACCOUNT],
    sweeps=[DISPATCH_SWEEP],
    seed_demo=seed_demo,
    sandboxes={"meta": start_demo_sandbox, "sheets": start_demo_sheets_sandbox},
)
