"""Position tracking: one shared poller per provider account.

Results remember when ``tasks_ready`` listed their task (the provider lists a finished task only
once) and how many ``task_get`` attempts failed; the poller's ``tasks_ready`` calls are kept so that
every process stays within the provider's per-minute limit.

Revision ID: 0310_ranktracking_poller
Revises: 0300_ranktracking
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import Json, UTCDateTime

revision = "0310_ranktracking_poller"
down_revision = "0300_ranktracking"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rt_results") as batch:
        batch.add_column(sa.Column("ready_at", UTCDateTime, nullable=True))
        batch.add_column(
            sa.Column("fetch_attempts", sa.Integer, nullable=False, server_default="0")
        )
    op.create_index(
        "ix_rt_results_ready",
        "rt_results",
        ["ready_at"],
        sqlite_where=sa.text("state = 'pending' AND ready_at IS NOT NULL"),
        postgresql_where=sa.text("state = 'pending' AND ready_at IS NOT NULL"),
    )
    op.create_table(
        "rt_poller_state",
        sa.Column("endpoint", sa.String(32), primary_key=True),
        sa.Column("calls", Json, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rt_poller_state")
    op.drop_index("ix_rt_results_ready", table_name="rt_results")
    with op.batch_alter_table("rt_results") as batch:
        batch.drop_column("fetch_attempts")
        batch.drop_column("ready_at")
