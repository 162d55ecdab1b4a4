"""Tables of the durable job queue and of the sweepers' state."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TextClause,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, UTCDateTime

# The states live in their own module; the names stay importable from here.
from app.scheduling.job_states import JOB_DEAD as JOB_DEAD
from app.scheduling.job_states import JOB_DISCARDED as JOB_DISCARDED
from app.scheduling.job_states import JOB_DONE as JOB_DONE
from app.scheduling.job_states import JOB_QUEUED as JOB_QUEUED
from app.scheduling.job_states import JOB_RUNNING as JOB_RUNNING
from app.scheduling.job_states import JOB_STATUSES as JOB_STATUSES
from app.scheduling.job_states import JOBS as JOBS

# The predicates of the partial indexes, as SQL text. A query reaches a partial index only when it
# states the index's predicate as this same literal text: PostgreSQL cannot prove it from a bound
# parameter (``status = $1``, as a prepared statement's generic plan has it), and SQLite matches
# the index's WHERE term by term. The indexes and the queries that rely on them both use these.
QUEUED_ROWS = JOBS.where(JOB_QUEUED)
"""Leasable jobs (``ix_jobs_leasable``)."""
RUNNING_ROWS = JOBS.where(JOB_RUNNING)
"""Leased jobs (``ix_jobs_running_lease``)."""
DONE_ROWS = JOBS.where(JOB_DONE)
"""Jobs that succeeded (``ix_jobs_done_finished``)."""
ENDED_ROWS = JOBS.where(JOB_DEAD, JOB_DISCARDED)
"""Dead and discarded jobs (``ix_jobs_ended_finished``, ``ix_jobs_ended_workspace``)."""


def in_index(rows: str, state: str | None = None) -> TextClause:
    """``rows`` (one of the predicates above) as a condition a query can carry, narrowed to
    ``state`` when the index holds more states than the query wants (``status IN ('dead',
    'discarded') AND status = 'dead'``)."""
    if state is None:
        return text(rows)
    narrowed = JOBS.where(state)
    return text(rows if narrowed == rows else f"{rows} AND {narrowed}")


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
            sqlite_where=text(QUEUED_ROWS),
            postgresql_where=text(QUEUED_ROWS),
        ),
        Index(
            "ix_jobs_running_lease",
            "lease_expires_at",
            sqlite_where=text(RUNNING_ROWS),
            postgresql_where=text(RUNNING_ROWS),
        ),
        # Finished jobs are indexed only where something reads them: done jobs by when they
        # finished (the purge), dead and discarded ones by when they ended, alone (the operators'
        # lists) and per workspace (a workspace's lists). A job enters one of these once, when it
        # ends; an index on ``status`` itself took a new entry on every write of a job's life.
        Index(
            "ix_jobs_done_finished",
            "finished_at",
            sqlite_where=text(DONE_ROWS),
            postgresql_where=text(DONE_ROWS),
        ),
        Index(
            "ix_jobs_ended_finished",
            "finished_at",
            sqlite_where=text(ENDED_ROWS),
            postgresql_where=text(ENDED_ROWS),
        ),
        Index(
            "ix_jobs_ended_workspace",
            "workspace_id",
            "finished_at",
            sqlite_where=text(ENDED_ROWS),
            postgresql_where=text(ENDED_ROWS),
        ),
        JOBS.check(),
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
    workspace_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    """The workspace the job works for (:mod:`app.scheduling.job_owners`); none: a platform job,
    which only the instance's operators see. Settled once the job is dead."""
    owner_known: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Whether ``workspace_id`` was settled (a dead job's owner is looked up once)."""


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


ATTEMPT_FAILED = "failed"
"""An attempt that raised (or timed out) and will be retried."""
ATTEMPT_DEAD = "dead"
"""The attempt after which the job is dead (its last try, or an error retrying cannot help)."""
ATTEMPT_LOST = "lost"
"""An attempt whose worker stopped: its lease expired and the job went back to the queue."""
ATTEMPT_DONE = "done"
"""A successful attempt recorded as a row (a revived arq job's; see :mod:`.attempts`)."""
ACTION_RETRIED = "retried"
ACTION_REQUEUED = "requeued"
ACTION_DISCARDED = "discarded"
ATTEMPT_OUTCOMES = (
    ATTEMPT_FAILED,
    ATTEMPT_DEAD,
    ATTEMPT_LOST,
    ATTEMPT_DONE,
    ACTION_RETRIED,
    ACTION_REQUEUED,
    ACTION_DISCARDED,
)


class JobAttempt(Base):
    """One entry of a job's history: an attempt that ended without success (when, where, what
    went wrong), or a person's action on a dead job (retried, requeued, discarded, by whom).

    A database-queue job's successful attempt is its row in ``jobs`` (``done``, by
    ``leased_by``): the hot path writes nothing more. Rows outlive a purged job only until the
    purge sweep removes them (:func:`app.scheduling.attempts.purge_attempts`)."""

    __tablename__ = "job_attempts"
    __table_args__ = (
        Index("ix_job_attempts_job", "job_id", "id"),
        Index("ix_job_attempts_finished", "finished_at"),
        CheckConstraint(
            "outcome IN ('failed', 'dead', 'lost', 'done', 'retried', 'requeued', 'discarded')",
            name="outcome",
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(100))
    attempt: Mapped[int] = mapped_column(Integer)
    """The try's number (1 for the first run; back to 1 after a retry); 0 for an action."""
    worker: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """Where it ran (host:pid:worker), or who acted (``user:<id>``, ``api_key:<id>``)."""
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
