"""Saved segments and their daily counts (FN-73); a campaign's preheader (FN-77).

Revision ID: 0600_saved_segments
Revises: 0580_funnel_experiments
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0600_saved_segments"
down_revision = "0580_funnel_experiments"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "saved_segments",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id",
            BigId,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("predicate", Json, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("workspace_id", "name", name="uq_saved_segments_workspace_id"),
    )
    op.create_table(
        "saved_segment_counts",
        sa.Column(
            "segment_id",
            BigId,
            sa.ForeignKey("saved_segments.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("taken_at", UTCDateTime, nullable=False),
    )
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("preheader", sa.String(500), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("preheader")
    op.drop_table("saved_segment_counts")
    op.drop_table("saved_segments")
