"""Tables of bulk jobs: one row per job (what it is, how far it got, where it resumes) and one
row per refused item (the per-row report)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.scheduling.bulk_states import BULK_CANCELLED as BULK_CANCELLED
from app.scheduling.bulk_states import BULK_DONE as BULK_DONE
from app.scheduling.bulk_states import BULK_FAILED as BULK_FAILED
from app.scheduling.bulk_states import BULK_FINAL as BULK_FINAL
from app.scheduling.bulk_states import BULK_JOBS as BULK_JOBS
from app.scheduling.bulk_states import BULK_QUEUED as BULK_QUEUED
from app.scheduling.bulk_states import BULK_RUNNING as BULK_RUNNING
from app.scheduling.bulk_states import BULK_STATUSES as BULK_STATUSES

FK = BigInteger().with_variant(Integer(), "sqlite")


class BulkJob(Base):
    """Work too large for one transaction, done in chunks. Each chunk commits its items together
    with the new ``cursor`` and counters, so a crash resumes exactly after the last chunk."""

    __tablename__ = "bulk_jobs"
    __table_args__ = (Index("ix_bulk_jobs_workspace", "workspace_id", "id"), BULK_JOBS.check())

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    params: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    """What the job was asked to do (kind-specific, small)."""
    # Deferred through mapped_column (not deferred()) so the column keeps the NOT NULL its
    # annotation says and the migration creates.
    source: Mapped[str] = mapped_column(Text, default="", deferred=True)
    """The uploaded input (e.g. the CSV text); emptied when the job ends."""
    cursor: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    """Where the next chunk starts (kind-specific)."""
    total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    processed: Mapped[int] = mapped_column(Integer, default=0)
    counters: Mapped[dict[str, int]] = mapped_column(Json, default=dict)
    error_count: Mapped[int] = mapped_column(Integer, default=0)
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class BulkJobError(Base):
    """One refused item of a bulk job: which one (``item``: a row number for imports), the field
    and why. Written in the chunk's transaction, so the report never disagrees with the data."""

    __tablename__ = "bulk_job_errors"
    __table_args__ = (Index("ix_bulk_job_errors_job", "bulk_job_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    bulk_job_id: Mapped[int] = mapped_column(FK, ForeignKey("bulk_jobs.id", ondelete="CASCADE"))
    item: Mapped[int] = mapped_column(Integer)
    field: Mapped[str] = mapped_column(String(200), default="")
    message: Mapped[str] = mapped_column(Text)
