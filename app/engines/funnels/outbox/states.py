"""The states of an outbox effect (``funnel_outbox.status``) and the moves between them.

An effect is written ``pending`` in the transaction that advances its run (FN-7) and stays
``pending`` through retries and quiet hours; delivery ends it ``sent``, ``failed`` (a permanent
error, or out of tries) or ``skipped`` (the consent gate suppressed it); a run's end or its
contact's deletion ``cancelled`` it."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

OutboxStatus = Literal["pending", "sent", "failed", "cancelled", "skipped"]
OUTBOX_STATUSES: tuple[OutboxStatus, ...] = literal_states(OutboxStatus)

OUTBOX_PENDING: Final = "pending"
OUTBOX_SENT: Final = "sent"
OUTBOX_FAILED: Final = "failed"
OUTBOX_CANCELLED: Final = "cancelled"
OUTBOX_SKIPPED: Final = "skipped"

OUTBOX = StateMachine(
    table="funnel_outbox",
    column="status",
    title="Outbox effect",
    states=OUTBOX_STATUSES,
    initial=(OUTBOX_PENDING,),
    transitions={
        OUTBOX_PENDING: (OUTBOX_SENT, OUTBOX_FAILED, OUTBOX_SKIPPED, OUTBOX_CANCELLED),
    },
)
