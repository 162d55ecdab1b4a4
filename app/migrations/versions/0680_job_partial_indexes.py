"""The job table's full indexes on ``status`` give way to partial indexes of finished jobs.

``ix_jobs_status_finished (status, finished_at)`` and ``ix_jobs_workspace_status (workspace_id,
status)`` took a new entry on each of a job's writes (queued, running, done: the state changes,
so PostgreSQL cannot update the row in place). Their readers are served by partial indexes that a
job enters once, when it ends: done jobs by ``finished_at`` (the purge), dead and discarded jobs by
``finished_at`` and by ``(workspace_id, finished_at)`` (the lists of dead jobs).

The predicates are written out as they stand at this revision (the code declares them once, in
``app.scheduling.models``).

Revision ID: 0680_job_partial_indexes
Revises: 0670_state_checks
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0680_job_partial_indexes"
down_revision = "0670_state_checks"
branch_labels = None
depends_on = None

DONE = "status = 'done'"
ENDED = "status IN ('dead', 'discarded')"

PARTIAL: dict[str, tuple[list[str], str]] = {
    "ix_jobs_done_finished": (["finished_at"], DONE),
    "ix_jobs_ended_finished": (["finished_at"], ENDED),
    "ix_jobs_ended_workspace": (["workspace_id", "finished_at"], ENDED),
}

FULL: dict[str, list[str]] = {
    "ix_jobs_status_finished": ["status", "finished_at"],
    "ix_jobs_workspace_status": ["workspace_id", "status"],
}


def upgrade() -> None:
    for name, (columns, where) in PARTIAL.items():
        op.create_index(
            name, "jobs", columns, sqlite_where=sa.text(where), postgresql_where=sa.text(where)
        )
    for name in FULL:
        op.drop_index(name, table_name="jobs")


def downgrade() -> None:
    for name, columns in FULL.items():
        op.create_index(name, "jobs", columns)
    for name in PARTIAL:
        op.drop_index(name, table_name="jobs")
