"""Funnels: the workspace's frequency cap and its per-contact, per-period ledger; the keyed
hashes of erased addresses whose suppression survives the contact's deletion.

Revision ID: 0240_funnels_frequency_cap
Revises: 0230_funnels_topics
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import Json, UTCDateTime

revision = "0240_funnels_frequency_cap"
down_revision = "0230_funnels_topics"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "funnel_frequency_caps",
        sa.Column(
            "workspace_id",
            FK,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("per_day", sa.Integer(), nullable=True),
        sa.Column("per_week", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "funnel_frequency_counts",
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("period", sa.String(16), primary_key=True),
        sa.Column(
            "workspace_id", FK, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("sent", sa.Integer(), nullable=False),
        sa.Column("until", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_funnel_frequency_counts_until", "funnel_frequency_counts", ["until"])
    op.create_table(
        "funnel_erased_addresses",
        sa.Column(
            "workspace_id",
            FK,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("suppressed", Json, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("funnel_erased_addresses")
    op.drop_index("ix_funnel_frequency_counts_until", table_name="funnel_frequency_counts")
    op.drop_table("funnel_frequency_counts")
    op.drop_table("funnel_frequency_caps")
