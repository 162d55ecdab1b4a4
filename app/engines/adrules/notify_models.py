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

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy import text as sql_text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.adrules.digest_states import DIGEST_FAILED as DIGEST_FAILED
from app.engines.adrules.digest_states import DIGEST_SENDING as DIGEST_SENDING
from app.engines.adrules.digest_states import DIGEST_SENT as DIGEST_SENT
from app.engines.adrules.digest_states import DIGEST_SKIPPED as DIGEST_SKIPPED
from app.engines.adrules.digest_states import DIGEST_STATUSES as DIGEST_STATUSES
from app.engines.adrules.digest_states import DIGESTS as DIGESTS
from app.engines.adrules.proposal_states import PROPOSAL_APPROVED as PROPOSAL_APPROVED
from app.engines.adrules.proposal_states import PROPOSAL_EXECUTED as PROPOSAL_EXECUTED
from app.engines.adrules.proposal_states import PROPOSAL_EXPIRED as PROPOSAL_EXPIRED
from app.engines.adrules.proposal_states import PROPOSAL_FAILED as PROPOSAL_FAILED
from app.engines.adrules.proposal_states import PROPOSAL_PENDING as PROPOSAL_PENDING
from app.engines.adrules.proposal_states import PROPOSAL_REJECTED as PROPOSAL_REJECTED
from app.engines.adrules.proposal_states import PROPOSAL_SKIPPED as PROPOSAL_SKIPPED
from app.engines.adrules.proposal_states import PROPOSAL_STATUSES as PROPOSAL_STATUSES
from app.engines.adrules.proposal_states import PROPOSALS as PROPOSALS


class Digest(Base):
    """One run's message to one channel."""

    __tablename__ = "adrules_digests"
    __table_args__ = (
        UniqueConstraint("batch_id", "channel_key", name="uq_adrules_digests_batch_channel"),
        Index("ix_adrules_digests_workspace", "workspace_id", "created_at"),
        DIGESTS.check(),
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
            sqlite_where=sql_text(PROPOSALS.where(PROPOSAL_PENDING)),
            postgresql_where=sql_text(PROPOSALS.where(PROPOSAL_PENDING)),
        ),
        Index(
            "ix_adrules_proposals_pending_object",
            "task_id",
            "campaign_id",
            sqlite_where=sql_text(PROPOSALS.where(PROPOSAL_PENDING)),
            postgresql_where=sql_text(PROPOSALS.where(PROPOSAL_PENDING)),
        ),
        PROPOSALS.check(),
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
