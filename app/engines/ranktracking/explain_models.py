"""What explains a movement: each keyword's results page as measured (a compact snapshot, kept for
``RT_SNAPSHOT_RETENTION_DAYS``), and the notes people put on the position charts.

Both tables are prefixed ``rt_`` like the rest of the engine. A snapshot belongs to one result row
(one keyword, one child run) and goes with it; an annotation belongs to a schedule, optionally to
one of its keywords.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, UTCDateTime


class SerpSnapshot(Base):
    """The results page behind one result: organic URLs in order with their domains, every
    feature with the domains it links to, the AI Overview's references (see
    :mod:`app.engines.ranktracking.explain.snapshot` for the encoding)."""

    __tablename__ = "rt_snapshots"
    __table_args__ = (Index("ix_rt_snapshots_created", "created_at"),)

    result_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_results.id", ondelete="CASCADE"), primary_key=True
    )
    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE"), index=True
    )
    body: Mapped[bytes] = mapped_column(sa.LargeBinary)
    """The snapshot, JSON compressed with zlib."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Annotation(Base):
    """A note on a schedule's charts at a moment ("new title tags live", "site migration"), for
    the whole schedule or one keyword."""

    __tablename__ = "rt_annotations"
    __table_args__ = (Index("ix_rt_annotations_schedule", "schedule_id", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    keyword: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """None: the note is shown on every chart of the schedule."""
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    text: Mapped[str] = mapped_column(Text)
    created_by: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
