"""Funnels: the record of experiments' winners (declared, automatic, reverted) and a campaign's
holdout.

Revision ID: 0580_funnel_experiments
Revises: 0570_funnel_ai_drafts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0580_funnel_experiments"
down_revision = "0570_funnel_ai_drafts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("campaigns", sa.Column("holdout", Json, nullable=True))
    op.create_table(
        "funnel_experiment_winners",
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
        sa.Column("node_id", sa.String(64), nullable=False),
        sa.Column("branch", sa.String(200), nullable=False),
        sa.Column("decided_by", sa.String(16), nullable=False),
        sa.Column("decided_by_user", BigId, nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("decided_at", UTCDateTime, nullable=False),
        sa.Column("reverted_at", UTCDateTime, nullable=True),
        sa.Column("reverted_by_user", BigId, nullable=True),
    )
    op.create_index(
        "ux_funnel_experiment_winners_standing",
        "funnel_experiment_winners",
        ["funnel_id", "node_id"],
        unique=True,
        sqlite_where=sa.text("reverted_at IS NULL"),
        postgresql_where=sa.text("reverted_at IS NULL"),
    )
    op.create_index(
        "ix_funnel_experiment_winners_funnel",
        "funnel_experiment_winners",
        ["funnel_id", "node_id", "decided_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_funnel_experiment_winners_funnel", table_name="funnel_experiment_winners")
    op.drop_index("ux_funnel_experiment_winners_standing", table_name="funnel_experiment_winners")
    op.drop_table("funnel_experiment_winners")
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("holdout")
