"""The states of a campaign recipient (``campaign_recipients.status``) and the moves between
them: written ``pending`` by the audience snapshot (``skipped`` at once when the holdout keeps
it back), then settled ``sent``, ``skipped`` (the consent gate's reason in ``detail``) or
``failed``."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

RecipientStatus = Literal["pending", "sent", "skipped", "failed"]
RECIPIENT_STATUSES: tuple[RecipientStatus, ...] = literal_states(RecipientStatus)

R_PENDING: Final = "pending"
R_SENT: Final = "sent"
R_SKIPPED: Final = "skipped"
R_FAILED: Final = "failed"

RECIPIENTS = StateMachine(
    table="campaign_recipients",
    column="status",
    title="Campaign recipient",
    states=RECIPIENT_STATUSES,
    initial=(R_PENDING, R_SKIPPED),
    transitions={R_PENDING: (R_SENT, R_SKIPPED, R_FAILED)},
    # The name an earlier migration gave it (the convention prefixes ``ck_<table>_``).
    check_name="ck_campaign_recipients_status",
)
