"""The states of a funnel run (``funnel_runs.status``) and the moves between them.

A run is ``active`` from its entry (``exited`` at once for a contact held out of the funnel's
experiment) until it reaches a goal or the end (``completed``), an exit node (``exited``), is
cancelled (its contact deleted: ``cancelled``) or fails (``failed``). An effect of a run that
completed normally may fail after the run ended: the run then takes its node's failure branch
(``active`` again) or ends ``failed`` (FN-7)."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

RunStatus = Literal["active", "completed", "exited", "cancelled", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = literal_states(RunStatus)

RUN_ACTIVE: Final = "active"
RUN_COMPLETED: Final = "completed"
RUN_EXITED: Final = "exited"
RUN_CANCELLED: Final = "cancelled"
RUN_FAILED: Final = "failed"

RUNS = StateMachine(
    table="funnel_runs",
    column="status",
    title="Funnel run",
    states=RUN_STATUSES,
    # A contact held out of the funnel's experiment gets a run created ended
    # (experiments/holdout.py), so they are counted and get nothing.
    initial=(RUN_ACTIVE, RUN_EXITED),
    transitions={
        RUN_ACTIVE: (RUN_COMPLETED, RUN_EXITED, RUN_CANCELLED, RUN_FAILED),
        # A completed run's late effect failure: its failure branch, or failed.
        RUN_COMPLETED: (RUN_ACTIVE, RUN_FAILED),
    },
)
