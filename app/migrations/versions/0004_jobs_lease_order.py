"""Platform: the leasable-jobs index follows the lease's order across queues.

The lease takes one batch from every queue a worker serves in one statement, the priority queue's
jobs first, then by priority and due time; the index is on those expressions, so the lease reads
its batch off the front of the index instead of sorting every due job.

Revision ID: 0004_jobs_lease_order
Revises: 0003_sweep_takeover
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_jobs_lease_order"
down_revision = "0003_sweep_takeover"
branch_labels = None
depends_on = None

QUEUED = sa.text("status = 'queued'")


def upgrade() -> None:
    op.drop_index("ix_jobs_leasable", table_name="jobs")
    op.create_index(
        "ix_jobs_leasable",
        "jobs",
        [sa.text("(queue <> 'priority')"), "priority", "run_at", "queue"],
        sqlite_where=QUEUED,
        postgresql_where=QUEUED,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_leasable", table_name="jobs")
    op.create_index(
        "ix_jobs_leasable",
        "jobs",
        ["queue", "priority", "run_at"],
        sqlite_where=QUEUED,
        postgresql_where=QUEUED,
    )
