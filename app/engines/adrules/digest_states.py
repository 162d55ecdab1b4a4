"""The states of an ad-rules digest e-mail (``adrules_digests.status``) and the moves between
them: claimed as ``sending``, then ``sent``, ``skipped`` (nothing to say, or the sender was
stopped) or ``failed``."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

DigestStatus = Literal["sending", "sent", "failed", "skipped"]
DIGEST_STATUSES: tuple[DigestStatus, ...] = literal_states(DigestStatus)

DIGEST_SENDING: Final = "sending"
DIGEST_SENT: Final = "sent"
DIGEST_FAILED: Final = "failed"
DIGEST_SKIPPED: Final = "skipped"

DIGESTS = StateMachine(
    table="adrules_digests",
    column="status",
    title="Ad-rules digest",
    states=DIGEST_STATUSES,
    initial=(DIGEST_SENDING,),
    transitions={DIGEST_SENDING: (DIGEST_SENT, DIGEST_FAILED, DIGEST_SKIPPED)},
)
