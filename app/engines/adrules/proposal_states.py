"""The states of an ad-rules change proposal (``adrules_proposals.status``, spec AR-28) and the
moves between them: ``pending`` until a member approves (``approved``: claimed by that
approval and being carried out, then ``executed``, ``skipped`` or ``failed``) or rejects it, or
the approval window ends (``expired``)."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

ProposalStatus = Literal[
    "pending", "approved", "executed", "skipped", "failed", "rejected", "expired"
]
PROPOSAL_STATUSES: tuple[ProposalStatus, ...] = literal_states(ProposalStatus)

PROPOSAL_PENDING: Final = "pending"
PROPOSAL_APPROVED: Final = "approved"
"""Claimed by one approval and being carried out."""
PROPOSAL_EXECUTED: Final = "executed"
PROPOSAL_SKIPPED: Final = "skipped"
"""Approved, but not written: the object changed, a guard or the stop refused it."""
PROPOSAL_FAILED: Final = "failed"
PROPOSAL_REJECTED: Final = "rejected"
PROPOSAL_EXPIRED: Final = "expired"

PROPOSALS = StateMachine(
    table="adrules_proposals",
    column="status",
    title="Ad-rules change proposal",
    states=PROPOSAL_STATUSES,
    initial=(PROPOSAL_PENDING,),
    transitions={
        PROPOSAL_PENDING: (PROPOSAL_APPROVED, PROPOSAL_REJECTED, PROPOSAL_EXPIRED),
        PROPOSAL_APPROVED: (PROPOSAL_EXECUTED, PROPOSAL_SKIPPED, PROPOSAL_FAILED),
    },
)
