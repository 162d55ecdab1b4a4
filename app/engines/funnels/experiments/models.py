"""The record of an experiment's winner: who or what declared it, when, why, and whether it was
reverted. The row whose ``reverted_at`` is empty routes new entrants of that split; reverting
keeps the row (the history stays readable) and returns the split to its weighted assignment."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, UTCDateTime


class ExperimentWinner(Base):
    __tablename__ = "funnel_experiment_winners"
    __table_args__ = (
        # At most one standing winner per experiment (funnel, split node).
        Index(
            "ux_funnel_experiment_winners_standing",
            "funnel_id",
            "node_id",
            unique=True,
            sqlite_where=text("reverted_at IS NULL"),
            postgresql_where=text("reverted_at IS NULL"),
        ),
        Index("ix_funnel_experiment_winners_funnel", "funnel_id", "node_id", "decided_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    funnel_id: Mapped[int] = mapped_column(BigId, ForeignKey("funnels.id", ondelete="CASCADE"))
    node_id: Mapped[str] = mapped_column(String(64))
    branch: Mapped[str] = mapped_column(String(200))
    decided_by: Mapped[str] = mapped_column(String(16))
    """``automatic`` (the verdict sweep) or ``person`` (declared by a member or a key)."""
    decided_by_user: Mapped[int | None] = mapped_column(BigId, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    decided_at: Mapped[datetime] = mapped_column(UTCDateTime)
    reverted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    reverted_by_user: Mapped[int | None] = mapped_column(BigId, nullable=True)
