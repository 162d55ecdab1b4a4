"""The states of one keyword's provider task (``rt_results.state``, RT-14) and the moves between
them: ``pending`` once posted (or ``failed`` when the post was refused), then ``retrieved``,
``no_data`` (the provider had no result for it) or ``failed``."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

ResultState = Literal["pending", "retrieved", "no_data", "failed"]
RESULT_STATES: tuple[ResultState, ...] = literal_states(ResultState)

PENDING: Final = "pending"
RETRIEVED: Final = "retrieved"
NO_DATA: Final = "no_data"
TASK_FAILED: Final = "failed"

RESULTS = StateMachine(
    table="rt_results",
    column="state",
    title="Rank-tracking keyword task",
    states=RESULT_STATES,
    initial=(PENDING, TASK_FAILED),
    transitions={PENDING: (RETRIEVED, NO_DATA, TASK_FAILED)},
)
