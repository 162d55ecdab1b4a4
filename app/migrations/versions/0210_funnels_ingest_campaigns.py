"""Funnels: inbound events, hosted forms, trigger bookkeeping, campaigns.

Revision ID: 0210_funnels_ingest_campaigns
Revises: 0200_funnels
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0210_funnels_ingest_campaigns"
down_revision = "0200_funnels"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _ws() -> sa.Column[int]:
    return sa.Column(
        "workspace_id", FK, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
    )


def _partial(where: str) -> dict[str, Any]:
    return {"sqlite_where": sa.text(where), "postgresql_where": sa.text(where)}


def upgrade() -> None:
    op.create_table(
        "funnel_inbound_events",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("external_id", sa.String(200), nullable=True),
        sa.Column("payload", Json, nullable=False),
        sa.Column("received_at", UTCDateTime, nullable=False),
        sa.Column("processed_at", UTCDateTime, nullable=True),
        sa.Column("contact_id", FK, nullable=True),
        sa.Column("outcome", sa.Text, nullable=True),
    )
    op.create_index(
        "ux_funnel_inbound_events_sender_id",
        "funnel_inbound_events",
        ["workspace_id", "source", "external_id"],
        unique=True,
        **_partial("external_id IS NOT NULL"),
    )
    op.create_index(
        "ix_funnel_inbound_events_unprocessed",
        "funnel_inbound_events",
        ["id"],
        **_partial("processed_at IS NULL"),
    )
    op.create_index(
        "ix_funnel_inbound_events_workspace", "funnel_inbound_events", ["workspace_id", "id"]
    )

    op.create_table(
        "funnel_forms",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("public_id", sa.String(40), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("fields", Json, nullable=False),
        sa.Column("add_tag", sa.String(100), nullable=True),
        sa.Column("add_list", sa.String(100), nullable=True),
        sa.Column("success_message", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_funnel_forms_workspace", "funnel_forms", ["workspace_id"])

    op.create_table(
        "funnel_trigger_fires",
        sa.Column(
            "funnel_id", FK, sa.ForeignKey("funnels.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("trigger_key", sa.String(64), primary_key=True),
        sa.Column("contact_id", FK, primary_key=True),
        sa.Column("occurrence", sa.String(40), primary_key=True),
        sa.Column("fired_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "funnel_segment_members",
        sa.Column(
            "funnel_id", FK, sa.ForeignKey("funnels.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("trigger_key", sa.String(64), primary_key=True),
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("since", UTCDateTime, nullable=False),
    )
    op.create_index("ix_funnel_segment_members_contact", "funnel_segment_members", ["contact_id"])

    op.create_table(
        "campaigns",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("subject", sa.String(500), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("html", sa.Text, nullable=True),
        sa.Column("audience", Json, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("send_at", UTCDateTime, nullable=True),
        sa.Column("rate_per_minute", sa.Integer, nullable=False),
        sa.Column("materialised_at", UTCDateTime, nullable=True),
        sa.Column("audience_size", sa.Integer, nullable=False),
        sa.Column("checkpoint", sa.Integer, nullable=False),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_campaigns_workspace", "campaigns", ["workspace_id", "id"])
    op.create_index(
        "ix_campaigns_due",
        "campaigns",
        ["send_at"],
        **_partial("status IN ('scheduled', 'sending')"),
    )

    op.create_table(
        "campaign_recipients",
        sa.Column(
            "campaign_id", FK, sa.ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column("sent_at", UTCDateTime, nullable=True),
    )
    op.create_index(
        "ux_campaign_recipients_contact",
        "campaign_recipients",
        ["campaign_id", "contact_id"],
        unique=True,
    )
    op.create_index(
        "ix_campaign_recipients_pending",
        "campaign_recipients",
        ["campaign_id", "seq"],
        **_partial("status = 'pending'"),
    )

    op.create_table(
        "campaign_events",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "campaign_id", FK, sa.ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("external_id", sa.String(200), nullable=True),
        sa.Column("at", UTCDateTime, nullable=False),
    )
    op.create_index(
        "ux_campaign_events_sender_id",
        "campaign_events",
        ["campaign_id", "external_id"],
        unique=True,
        **_partial("external_id IS NOT NULL"),
    )
    op.create_index("ix_campaign_events_kind", "campaign_events", ["campaign_id", "kind", "seq"])


def downgrade() -> None:
    for table in (
        "campaign_events",
        "campaign_recipients",
        "campaigns",
        "funnel_segment_members",
        "funnel_trigger_fires",
        "funnel_forms",
        "funnel_inbound_events",
    ):
        op.drop_table(table)
