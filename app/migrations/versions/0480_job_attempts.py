"""Dead-job operations: every job's history of attempts, a job's owning workspace, and the
``discarded`` state (a dead job a person gave up on, kept with its history).

Revision ID: 0480_job_attempts
Revises: 0010_bulk_jobs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0480_job_attempts"
down_revision = "0010_bulk_jobs"
branch_labels = None
depends_on = None

STATUSES = "status IN ('queued', 'running', 'done', 'dead', 'discarded')"
OUTCOMES = "outcome IN ('failed', 'dead', 'lost', 'done', 'retried', 'requeued', 'discarded')"

# SQLite's batch mode rebuilds the table; its partial indexes are dropped first and made again
# after, so their WHERE clauses cannot be lost in the copy.
PARTIAL = {
    "ix_jobs_leasable": (["queue", "priority", "run_at"], "status = 'queued'"),
    "ix_jobs_running_lease": (["lease_expires_at"], "status = 'running'"),
}


def _drop_partial() -> None:
    for name in PARTIAL:
        op.drop_index(name, table_name="jobs")


def _create_partial() -> None:
    for name, (columns, where) in PARTIAL.items():
        op.create_index(
            name,
            "jobs",
            columns,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        _drop_partial()
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("workspace_id", BigId, nullable=True))
        batch.add_column(
            sa.Column("owner_known", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.create_check_constraint("status", STATUSES)
    if sqlite:
        _create_partial()
    op.create_index("ix_jobs_workspace_status", "jobs", ["workspace_id", "status"])
    op.create_table(
        "job_attempts",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(255), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("worker", sa.String(100), nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.CheckConstraint(OUTCOMES, name="outcome"),
    )
    op.create_index("ix_job_attempts_job", "job_attempts", ["job_id", "id"])
    op.create_index("ix_job_attempts_finished", "job_attempts", ["finished_at"])


def downgrade() -> None:
    op.drop_table("job_attempts")
    op.drop_index("ix_jobs_workspace_status", table_name="jobs")
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        _drop_partial()
    # Discarded jobs have no state before this revision: they go back to being dead.
    op.execute("UPDATE jobs SET status = 'dead' WHERE status = 'discarded'")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("status", type_="check")
        batch.drop_column("owner_known")
        batch.drop_column("workspace_id")
    if sqlite:
        _create_partial()
