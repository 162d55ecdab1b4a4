"""Tables of the durable job queue and of the sweepers' state."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, LargeBinary, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import UTCDateTime

JOB_QUEUED = "queued"
JOB_RUNNING = "running"
JOB_DONE = "done"
JOB_DEAD = "dead"


class Job(Base):
    """A unit of background work. The id doubles as the deduplication key."""

    __tablename__ = "jobs"
    __table_args__ = (
        # Only leasable rows are indexed, so the lease query stays cheap however many finished
        # jobs the table keeps.
        Index(
            "ix_jobs_leasable",
            "queue",
            "priority",
            "run_at",
            sqlite_where=text("status = 'queued'"),
            postgresql_where=text("status = 'queued'"),
        ),
        Index(
            "ix_jobs_running_lease",
            "lease_expires_at",
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
        Index("ix_jobs_status_finished", "status", "finished_at"),
    )

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    queue: Mapped[str] = mapped_column(String(50))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_tries: Mapped[int] = mapped_column(Integer)
    run_at: Mapped[datetime] = mapped_column(UTCDateTime)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    leased_by: Mapped[str | None] = mapped_column(String(100), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SweeperState(Base):
    """One row per sweep: who holds the current tick, and what the last ticks did."""

    __tablename__ = "sweeper_state"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    last_tick_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """The newest tick claimed."""
    finished_tick_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """The newest tick that ran to its end; behind ``last_tick_at`` while one runs (or its runner
    died)."""
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_duration_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_lag_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_succeeded_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """When a tick last finished without an error (readiness reports a sweep stale without one)."""
    ticks: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
