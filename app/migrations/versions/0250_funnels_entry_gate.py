"""Funnels: the entry gate of funnels that limit re-entry to once per N days (when each contact
last entered one).

Revision ID: 0250_funnels_entry_gate
Revises: 0240_funnels_frequency_cap
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import UTCDateTime

revision = "0250_funnels_entry_gate"
down_revision = "0240_funnels_frequency_cap"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "funnel_entry_gate",
        sa.Column(
            "funnel_id", FK, sa.ForeignKey("funnels.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("entered_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("funnel_entry_gate")
