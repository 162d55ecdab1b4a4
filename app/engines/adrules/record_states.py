"""The states of an ad-rule execution record (``adrules_records.status``: one per rule, task
and object of a run) and the moves between them.

A record is written once with its outcome; only a ``proposed`` change (a rule that requires
approval, spec AR-28) moves on, once a member decides or the approval window ends."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

RecordStatus = Literal["executed", "not_executed", "skipped", "error", "would_execute", "proposed"]
RECORD_STATUSES: tuple[RecordStatus, ...] = literal_states(RecordStatus)

RECORD_EXECUTED: Final = "executed"
RECORD_NOT_EXECUTED: Final = "not_executed"
RECORD_SKIPPED: Final = "skipped"
RECORD_ERROR: Final = "error"
RECORD_WOULD_EXECUTE: Final = "would_execute"
"""A shadow rule's record of an action it would have carried out (before and after as planned
from the live values); nothing was written or sent."""
RECORD_PROPOSED: Final = "proposed"
"""A rule that requires approval planned this change and holds it (spec AR-28): the record
becomes ``executed``, ``skipped`` or ``error`` once a member decides or the window ends."""

RECORDS = StateMachine(
    table="adrules_records",
    column="status",
    title="Ad-rule execution record",
    states=RECORD_STATUSES,
    initial=RECORD_STATUSES,
    transitions={RECORD_PROPOSED: (RECORD_EXECUTED, RECORD_SKIPPED, RECORD_ERROR)},
)
