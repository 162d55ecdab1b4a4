"""Tables of saved segments (FN-73): a named, described predicate, and one count per day taken
by the daily sweep (its count over time)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import Date, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime


class SavedSegment(Base):
    __tablename__ = "saved_segments"
    __table_args__ = (UniqueConstraint("workspace_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    predicate: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SegmentCount(Base):
    """How many contacts matched a saved segment on one day (taken once a day)."""

    __tablename__ = "saved_segment_counts"

    segment_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("saved_segments.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    taken_at: Mapped[datetime] = mapped_column(UTCDateTime)
