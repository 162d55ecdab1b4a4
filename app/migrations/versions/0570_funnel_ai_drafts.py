"""Funnels: the record kept with a funnel drafted by a model (FN-35).

Revision ID: 0570_funnel_ai_drafts
Revises: 0590_ranktracking_explain
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0570_funnel_ai_drafts"
down_revision = "0590_ranktracking_explain"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "funnel_ai_drafts",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id",
            BigId,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "funnel_id", BigId, sa.ForeignKey("funnels.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("created_by", BigId, nullable=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("constraints", Json, nullable=False),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("endpoint", sa.String(500), nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("total_tokens", sa.Integer, nullable=False),
        sa.Column("rounds", Json, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("findings", Json, nullable=False),
        sa.Column("simulation", Json, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.CheckConstraint("outcome IN ('valid', 'repaired', 'invalid')", name="outcome"),
        sa.UniqueConstraint("funnel_id", name="uq_funnel_ai_drafts_funnel_id"),
    )


def downgrade() -> None:
    op.drop_table("funnel_ai_drafts")
