"""Tags on a schedule's keywords (RT-70).

Revision ID: 0640_ranktracking_keyword_tags
Revises: 0610_meta_connect
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0640_ranktracking_keyword_tags"
down_revision = "0610_meta_connect"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rt_keyword_tags",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "schedule_id",
            BigId,
            sa.ForeignKey("rt_schedules.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("keyword", sa.String(200), nullable=False),
        sa.Column("tag", sa.String(50), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("schedule_id", "keyword", "tag", name="uq_rt_keyword_tags_schedule_id"),
    )
    op.create_index("ix_rt_keyword_tags_tag", "rt_keyword_tags", ["schedule_id", "tag"])


def downgrade() -> None:
    op.drop_index("ix_rt_keyword_tags_tag", table_name="rt_keyword_tags")
    op.drop_table("rt_keyword_tags")
