"""The states of an ad-rule batch record (``adrules_batches.status``: one per dispatch and
account) and the moves between them.

The dispatch creates the record once the account's campaigns are fetched: ``queued`` (its job is
on the queue), ``empty`` (the pre-filters left nothing), ``skipped`` (the fetch failed) or
``deferred`` (the tick's budget ran out first; the next tick fetches it and settles it the same
way). The job makes it ``running`` and ends it ``completed`` or ``failed``; a run Meta throttled
goes back to ``queued``."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

BatchStatus = Literal["queued", "empty", "skipped", "running", "completed", "failed", "deferred"]
BATCH_STATUSES: tuple[BatchStatus, ...] = literal_states(BatchStatus)

BATCH_QUEUED: Final = "queued"
"""Campaigns fetched and the account's job is on the queue."""
BATCH_EMPTY: Final = "empty"
"""The pre-filters left no campaign on this account: nothing to evaluate, no job."""
BATCH_SKIPPED: Final = "skipped"
"""Fetching the account's campaigns failed (after retries for transient errors)."""
BATCH_DEFERRED: Final = "deferred"
"""The tick's budget ran out before the account's campaigns arrived: the next tick fetches it
first, and this record then moves on to ``queued``, ``empty`` or ``skipped``."""
BATCH_RUNNING: Final = "running"
BATCH_COMPLETED: Final = "completed"
BATCH_FAILED: Final = "failed"

BATCHES = StateMachine(
    table="adrules_batches",
    column="status",
    title="Ad-rule batch record",
    states=BATCH_STATUSES,
    initial=(BATCH_QUEUED, BATCH_EMPTY, BATCH_SKIPPED, BATCH_DEFERRED),
    transitions={
        BATCH_DEFERRED: (BATCH_QUEUED, BATCH_EMPTY, BATCH_SKIPPED, BATCH_DEFERRED),
        BATCH_QUEUED: (BATCH_RUNNING,),
        BATCH_RUNNING: (BATCH_COMPLETED, BATCH_FAILED, BATCH_QUEUED),
    },
)
