"""Read-only links to a schedule's position report, given to a client who has no account.

The link carries a random token; only its SHA-256 is stored, so a copy of the database opens no
report. A link lives 7, 30 or 90 days and can be revoked before then; both are kept on the row
(not deleted) so the owner's list shows what was shared and until when.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, UTCDateTime

LINK_DAYS = (7, 30, 90)
"""The lifetimes an owner may pick."""


class ReportLink(Base):
    __tablename__ = "rt_report_links"
    __table_args__ = (CheckConstraint("days IN (7, 30, 90)", name="days"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    """The token's first characters, so the owner can tell links apart in the list."""
    days: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
