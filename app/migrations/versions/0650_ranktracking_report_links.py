"""Shared read-only report links of a schedule and the workspace's logo (RT-113..RT-118).

Revision ID: 0650_ranktracking_report_links
Revises: 0640_ranktracking_keyword_tags
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0650_ranktracking_report_links"
down_revision = "0640_ranktracking_keyword_tags"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rt_report_links",
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
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("days", sa.Integer, nullable=False),
        sa.Column(
            "created_by", BigId, sa.ForeignKey("users.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("revoked_at", UTCDateTime, nullable=True),
        sa.CheckConstraint("days IN (7, 30, 90)", name="days"),
        sa.UniqueConstraint("token_hash", name="uq_rt_report_links_token_hash"),
    )
    op.create_index("ix_rt_report_links_workspace_id", "rt_report_links", ["workspace_id"])
    op.create_index("ix_rt_report_links_schedule_id", "rt_report_links", ["schedule_id"])
    op.create_table(
        "workspace_logos",
        sa.Column(
            "workspace_id",
            BigId,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("content_type", sa.String(20), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workspace_logos")
    op.drop_index("ix_rt_report_links_schedule_id", table_name="rt_report_links")
    op.drop_index("ix_rt_report_links_workspace_id", table_name="rt_report_links")
    op.drop_table("rt_report_links")
