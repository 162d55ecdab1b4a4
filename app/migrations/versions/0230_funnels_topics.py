"""Funnels: a campaign names its topic (the preference page lets a contact leave one topic).

Revision ID: 0230_funnels_topics
Revises: 0220_funnels_outside
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0230_funnels_topics"
down_revision = "0220_funnels_outside"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(
            sa.Column("topic", sa.String(100), nullable=False, server_default="marketing")
        )


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("topic")
