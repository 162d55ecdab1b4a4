"""Funnels: provider configuration per workspace, effect results, AI quota, usage and cache.

Revision ID: 0220_funnels_outside
Revises: 0210_funnels_ingest_campaigns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0220_funnels_outside"
down_revision = "0210_funnels_ingest_campaigns"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _ws() -> sa.Column[int]:
    return sa.Column(
        "workspace_id", FK, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
    )


def _org(*, primary_key: bool = False) -> sa.Column[int]:
    return sa.Column(
        "organisation_id",
        FK,
        sa.ForeignKey("organisations.id", ondelete="CASCADE"),
        nullable=False,
        primary_key=primary_key,
    )


def upgrade() -> None:
    op.create_table(
        "funnel_providers",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("shape", sa.String(16), nullable=False),
        sa.Column("base_url", sa.String(500), nullable=False),
        sa.Column("options", Json, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("workspace_id", "kind"),
    )
    op.create_table(
        "funnel_effect_results",
        sa.Column(
            "outbox_id",
            FK,
            sa.ForeignKey("funnel_outbox.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        _ws(),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("result", Json, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "funnel_ai_quotas",
        _org(primary_key=True),
        sa.Column("quota_tokens", sa.Integer, nullable=True),
        sa.Column("period_start", UTCDateTime, nullable=False),
        sa.Column("used_tokens", sa.Integer, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "funnel_ai_usage",
        sa.Column("id", BigId, primary_key=True),
        _org(),
        _ws(),
        sa.Column("idempotency_key", sa.String(200), nullable=False, unique=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("detail", sa.String(200), nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_funnel_ai_usage_org_at", "funnel_ai_usage", ["organisation_id", "at"])
    op.create_table(
        "funnel_ai_cache",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("cache_key", sa.String(80), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("workspace_id", "cache_key"),
    )


def downgrade() -> None:
    for table in (
        "funnel_ai_cache",
        "funnel_ai_usage",
        "funnel_ai_quotas",
        "funnel_effect_results",
        "funnel_providers",
    ):
        op.drop_table(table)
