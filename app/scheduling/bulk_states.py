"""The states of a bulk job (``bulk_jobs.status``) and the moves between them.

Created ``queued``; its first chunk makes it ``running``; it ends ``done`` (every chunk
committed), ``failed`` (an error no retry helps) or ``cancelled`` (a person stopped it, or the
work it belongs to ended)."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

BulkStatus = Literal["queued", "running", "done", "failed", "cancelled"]

BULK_QUEUED: Final = "queued"
BULK_RUNNING: Final = "running"
BULK_DONE: Final = "done"
BULK_FAILED: Final = "failed"
BULK_CANCELLED: Final = "cancelled"
BULK_FINAL = (BULK_DONE, BULK_FAILED, BULK_CANCELLED)
BULK_STATUSES: tuple[BulkStatus, ...] = literal_states(BulkStatus)

BULK_JOBS = StateMachine(
    table="bulk_jobs",
    column="status",
    title="Bulk job",
    states=BULK_STATUSES,
    initial=(BULK_QUEUED,),
    transitions={
        BULK_QUEUED: (BULK_RUNNING, BULK_FAILED, BULK_CANCELLED),
        BULK_RUNNING: (BULK_DONE, BULK_FAILED, BULK_CANCELLED),
    },
)
