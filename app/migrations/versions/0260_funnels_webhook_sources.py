"""Funnels: webhook sources — each payment or booking provider endpoint of a workspace with its
own URL, signature scheme and encrypted signing secret.

Revision ID: 0260_funnels_webhook_sources
Revises: 0250_funnels_entry_gate
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import UTCDateTime

revision = "0260_funnels_webhook_sources"
down_revision = "0250_funnels_entry_gate"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "funnel_webhook_sources",
        sa.Column("id", FK, primary_key=True),
        sa.Column(
            "workspace_id", FK, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("public_id", sa.String(40), nullable=False, unique=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("receives", sa.String(16), nullable=False),
        sa.Column("secret_ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("secret_rotated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("workspace_id", "name"),
    )


def downgrade() -> None:
    op.drop_table("funnel_webhook_sources")
