"""Bulk jobs: chunked background work with progress and a per-item report.

Revision ID: 0010_bulk_jobs
Revises: 0002_idempotency
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0010_bulk_jobs"
down_revision = "0002_idempotency"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "bulk_jobs",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id", FK, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("params", Json, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("cursor", Json, nullable=False),
        sa.Column("total", sa.Integer, nullable=True),
        sa.Column("processed", sa.Integer, nullable=False),
        sa.Column("counters", Json, nullable=False),
        sa.Column("error_count", sa.Integer, nullable=False),
        sa.Column("chunks", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
    )
    op.create_index("ix_bulk_jobs_workspace", "bulk_jobs", ["workspace_id", "id"])
    op.create_table(
        "bulk_job_errors",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "bulk_job_id", FK, sa.ForeignKey("bulk_jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("item", sa.Integer, nullable=False),
        sa.Column("field", sa.String(200), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_index("ix_bulk_job_errors_job", "bulk_job_errors", ["bulk_job_id", "id"])


def downgrade() -> None:
    op.drop_table("bulk_job_errors")
    op.drop_table("bulk_jobs")
