"""Tables of run digests and approvals (spec AR-27, AR-28).

``adrules_digests`` holds one row per run (``batch_id``) and channel: the row is the claim — the
first account job to find the whole run finished inserts it, a second one finds it there — so a
run sends one message per channel however many accounts and retries it had.

``adrules_proposals`` holds the changes a rule that requires approval planned instead of writing:
one per object and task of a run, ``pending`` until a member approves or rejects it or its window
ends. Its states and their transitions live in :mod:`app.engines.adrules.approvals.states`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy import text as sql_text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime

DIGEST_SENDING = "sending"
DIGEST_SENT = "sent"
DIGEST_FAILED = "failed"
DIGEST_SKIPPED = "skipped"
DIGEST_STATUSES = (DIGEST_SENDING, DIGEST_SENT, DIGEST_FAILED, DIGEST_SKIPPED)

PROPOSAL_PENDING = "pending"
PROPOSAL_APPROVED = "approved"
"""Claimed by one approval and being carried out."""
PROPOSAL_EXECUTED = "executed"
PROPOSAL_SKIPPED = "skipped"
"""Approved, but not written: the object changed, a guard or the stop refused it."""
PROPOSAL_FAILED = "failed"
PROPOSAL_REJECTED = "rejected"
PROPOSAL_EXPIRED = "expired"
PROPOSAL_STATUSES = (
    PROPOSAL_PENDING,
    PROPOSAL_APPROVED,
    PROPOSAL_EXECUTED,
    PROPOSAL_SKIPPED,
    PROPOSAL_FAILED,
    PROPOSAL_REJECTED,
    PROPOSAL_EXPIRED,
)


def _in(statuses: tuple[str, ...]) -> str:
    return "status IN ({})".format(", ".join(f"'{s}'" for s in statuses))


class Digest(Base):
    """One run's message to one channel."""

    __tablename__ = "adrules_digests"
    __table_args__ = (
        UniqueConstraint("batch_id", "channel_key", name="uq_adrules_digests_batch_channel"),
        Index("ix_adrules_digests_workspace", "workspace_id", "created_at"),
        CheckConstraint(_in(DIGEST_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    rule_id: Mapped[int] = mapped_column(BigId, ForeignKey("adrules_rules.id", ondelete="CASCADE"))
    batch_id: Mapped[str] = mapped_column(String(32))
    channel_key: Mapped[str] = mapped_column(String(32))
    """Which channel: a digest of the kind and the address (never the address itself)."""
    channel: Mapped[str] = mapped_column(String(16))
    """``email``, ``signed_json``, ``slack`` or ``teams``."""
    status: Mapped[str] = mapped_column(String(16))
    objects: Mapped[int] = mapped_column(Integer, default=0)
    """Records the digest summed up."""
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    """Why it failed or was skipped, or the receiver's answer."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Proposal(Base):
    """A change a run planned and holds for a member's approval."""

    __tablename__ = "adrules_proposals"
    __table_args__ = (
        UniqueConstraint(
            "batch_id", "task_id", "campaign_id", name="uq_adrules_proposals_batch_task_object"
        ),
        Index("ix_adrules_proposals_workspace_batch", "workspace_id", "batch_id"),
        # The expiry sweep and "is one already waiting": pending proposals only.
        Index(
            "ix_adrules_proposals_pending",
            "expires_at",
            sqlite_where=sql_text("status = 'pending'"),
            postgresql_where=sql_text("status = 'pending'"),
        ),
        Index(
            "ix_adrules_proposals_pending_object",
            "task_id",
            "campaign_id",
            sqlite_where=sql_text("status = 'pending'"),
            postgresql_where=sql_text("status = 'pending'"),
        ),
        CheckConstraint(_in(PROPOSAL_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    rule_id: Mapped[int] = mapped_column(BigId, ForeignKey("adrules_rules.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(BigId, ForeignKey("adrules_tasks.id", ondelete="CASCADE"))
    ad_account_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("adrules_ad_accounts.id", ondelete="CASCADE")
    )
    batch_id: Mapped[str] = mapped_column(String(32))
    campaign_id: Mapped[str] = mapped_column(String(40))
    campaign_name: Mapped[str] = mapped_column(String(400))
    action: Mapped[str] = mapped_column(String(32))
    write: Mapped[dict[str, Any]] = mapped_column(Json)
    """The fields the run would have written (Graph values)."""
    before: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    after: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
