"""Tags on a schedule's keywords ("brand", "blog", "from search console"): a keyword may carry
several, a tag many keywords; the positions table and the charts are filtered by one.

A tag belongs to a (schedule, keyword) pair, not to a list: the same keyword measured by two
schedules (two markets, two devices) is grouped independently in each.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, UTCDateTime

MAX_TAG_LENGTH = 50


class KeywordTag(Base):
    __tablename__ = "rt_keyword_tags"
    __table_args__ = (
        UniqueConstraint("schedule_id", "keyword", "tag"),
        # The filter's query: a schedule's keywords carrying one tag.
        Index("ix_rt_keyword_tags_tag", "schedule_id", "tag"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    keyword: Mapped[str] = mapped_column(String(200))
    """Normalised like every member (RT-3)."""
    tag: Mapped[str] = mapped_column(String(MAX_TAG_LENGTH))
    """Trimmed, whitespace collapsed and case-folded, so "Brand" and "brand " are one tag."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
