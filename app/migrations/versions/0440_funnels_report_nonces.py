"""Funnels: the one-time tokens of signed delivery reports (Mailgun's ``token``), remembered until
their timestamp is too old to be accepted, so a captured request cannot be replayed.

Revision ID: 0440_funnels_report_nonces
Revises: 0420_funnels_consent_gate
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0440_funnels_report_nonces"
down_revision = "0420_funnels_consent_gate"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "funnel_report_nonces",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id",
            FK,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("nonce", sa.String(200), nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.CheckConstraint("provider IN ('mailgun')", name="ck_funnel_report_nonces_provider"),
    )
    op.create_index(
        "ux_funnel_report_nonces",
        "funnel_report_nonces",
        ["workspace_id", "provider", "nonce"],
        unique=True,
    )
    op.create_index("ix_funnel_report_nonces_expires", "funnel_report_nonces", ["expires_at"])


def downgrade() -> None:
    op.drop_table("funnel_report_nonces")
