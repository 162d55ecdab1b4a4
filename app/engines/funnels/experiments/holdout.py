"""The holdout at the door: a contact in the funnel's control share gets a run that is recorded
and ended at once (``exited``, reason ``holdout``), so they are counted, get nothing, and keep
their place in the control group on re-entry (the assignment is a hash of funnel and contact)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.engines.funnels.runs.states import RUN_EXITED, RUNS

HOLDOUT_REASON = "holdout"


def hold_back(row: dict[str, Any], now: datetime) -> None:
    """Turn a run row about to be inserted into a held-out one."""
    row.update(RUNS.create(RUN_EXITED))
    row["wake_at"] = None
    row["ended_at"] = now
    row["exit_reason"] = HOLDOUT_REASON
    row["context"] = {**row["context"], "holdout": True}
