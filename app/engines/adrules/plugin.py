"""The Ad rules engine's jobs and sweeps, as registered with the process."""

from __future__ import annotations

from app.engines.adrules.approvals.expire import EXPIRE_SWEEP
from app.engines.adrules.claim.sweep import DISPATCH_SWEEP
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.plugin import EnginePlugin

PLUGIN = EnginePlugin(
    name="adrules",
    title="Ad rules",
    jobs=[RUN_ACCOUNT],
    sweeps=[DISPATCH_SWEEP, EXPIRE_SWEEP],
)
