"""Position tracking: results-page snapshots that explain movements, and chart annotations (RT-70..).

Revision ID: 0590_ranktracking_explain
Revises: 0560_adrules_zones_bids_windows
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0590_ranktracking_explain"
down_revision = "0560_adrules_zones_bids_windows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rt_snapshots",
        sa.Column(
            "result_id",
            BigId,
            sa.ForeignKey("rt_results.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "schedule_id",
            BigId,
            sa.ForeignKey("rt_schedules.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_rt_snapshots_created", "rt_snapshots", ["created_at"])
    op.create_index("ix_rt_snapshots_schedule_id", "rt_snapshots", ["schedule_id"])
    op.create_table(
        "rt_annotations",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id",
            BigId,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "schedule_id",
            BigId,
            sa.ForeignKey("rt_schedules.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("keyword", sa.String(200), nullable=True),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column(
            "created_by", BigId, sa.ForeignKey("users.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_rt_annotations_schedule", "rt_annotations", ["schedule_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_rt_annotations_schedule", table_name="rt_annotations")
    op.drop_table("rt_annotations")
    op.drop_index("ix_rt_snapshots_schedule_id", table_name="rt_snapshots")
    op.drop_index("ix_rt_snapshots_created", table_name="rt_snapshots")
    op.drop_table("rt_snapshots")
