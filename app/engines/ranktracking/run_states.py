"""The states of a rank-tracking child run (``rt_runs.status``, RT-33) and the moves between
them.

Admission writes a run ``dispatching`` (its reservation held), or already ended: ``failed`` (the
launch was refused), ``skipped_balance`` (the balance could not cover it) or
``skipped_dispatch``. The run's job posts its provider tasks (``running``) and closes it
``succeeded``, ``partial`` or ``failed`` once every keyword is settled; a run whose job never
started is ``skipped_dispatch``; pausing or ending its schedule closes an active run ``failed``
(error code ``cancelled``)."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

RunStatus = Literal[
    "dispatching",
    "running",
    "succeeded",
    "partial",
    "failed",
    "skipped_balance",
    "skipped_dispatch",
]
RUN_STATUSES: tuple[RunStatus, ...] = literal_states(RunStatus)

DISPATCHING: Final = "dispatching"
RUNNING: Final = "running"
SUCCEEDED: Final = "succeeded"
PARTIAL: Final = "partial"
FAILED: Final = "failed"
SKIPPED_BALANCE: Final = "skipped_balance"
SKIPPED_DISPATCH: Final = "skipped_dispatch"
ACTIVE_RUN_STATUSES: tuple[RunStatus, ...] = (DISPATCHING, RUNNING)
TERMINAL_RUN_STATUSES: tuple[RunStatus, ...] = (
    SUCCEEDED,
    PARTIAL,
    FAILED,
    SKIPPED_BALANCE,
    SKIPPED_DISPATCH,
)

RUNS = StateMachine(
    table="rt_runs",
    column="status",
    title="Rank-tracking run",
    states=RUN_STATUSES,
    initial=(DISPATCHING, FAILED, SKIPPED_BALANCE, SKIPPED_DISPATCH),
    transitions={
        # Ended at once when no task is left pending after the post.
        DISPATCHING: (RUNNING, SUCCEEDED, PARTIAL, FAILED, SKIPPED_DISPATCH),
        RUNNING: (SUCCEEDED, PARTIAL, FAILED),
    },
)
