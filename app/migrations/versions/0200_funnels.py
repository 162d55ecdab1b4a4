"""Funnels: contacts, tags, lists, fields, events, funnels, versions, runs, steps, outbox.

Revision ID: 0200_funnels
Revises: 0001_platform
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0200_funnels"
down_revision = "0001_platform"
branch_labels = ("funnels",)
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _ws() -> sa.Column[int]:
    return sa.Column(
        "workspace_id", FK, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    op.create_table(
        "contacts",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("phone", sa.String(40), nullable=True),
        sa.Column("first_name", sa.String(200), nullable=False),
        sa.Column("last_name", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("fields", Json, nullable=False),
        sa.Column("consent", Json, nullable=False),
        sa.Column("suppressed", Json, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("deleted_at", UTCDateTime, nullable=True),
    )
    op.create_index(
        "ux_contacts_workspace_email",
        "contacts",
        ["workspace_id", "email"],
        unique=True,
        sqlite_where=sa.text("deleted_at IS NULL AND email IS NOT NULL"),
        postgresql_where=sa.text("deleted_at IS NULL AND email IS NOT NULL"),
    )
    op.create_index("ix_contacts_workspace_id", "contacts", ["workspace_id", "id"])

    op.create_table(
        "contact_fields",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.UniqueConstraint("workspace_id", "key"),
    )
    op.create_table(
        "tags",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("name", sa.String(100), nullable=False),
        sa.UniqueConstraint("workspace_id", "name"),
    )
    op.create_table(
        "contact_tags",
        sa.Column(
            "contact_id",
            FK,
            sa.ForeignKey("contacts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tag_id", FK, sa.ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_contact_tags_tag_id", "contact_tags", ["tag_id"])
    op.create_table(
        "contact_lists",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("name", sa.String(100), nullable=False),
        sa.UniqueConstraint("workspace_id", "name"),
    )
    op.create_table(
        "list_members",
        sa.Column(
            "list_id",
            FK,
            sa.ForeignKey("contact_lists.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "contact_id",
            FK,
            sa.ForeignKey("contacts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("joined_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_list_members_contact_id", "list_members", ["contact_id"])

    op.create_table(
        "contact_events",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("external_id", sa.String(200), nullable=True),
        sa.Column("properties", Json, nullable=False),
        sa.Column("occurred_at", UTCDateTime, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("matched_at", UTCDateTime, nullable=True),
    )
    op.create_index(
        "ux_contact_events_source",
        "contact_events",
        ["workspace_id", "source", "external_id"],
        unique=True,
        sqlite_where=sa.text("external_id IS NOT NULL"),
        postgresql_where=sa.text("external_id IS NOT NULL"),
    )
    op.create_index(
        "ix_contact_events_contact", "contact_events", ["contact_id", "name", "occurred_at"]
    )
    op.create_index(
        "ix_contact_events_unmatched",
        "contact_events",
        ["id"],
        sqlite_where=sa.text("matched_at IS NULL"),
        postgresql_where=sa.text("matched_at IS NULL"),
    )

    op.create_table(
        "funnels",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("draft", Json, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("current_version_id", FK, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_funnels_workspace_id", "funnels", ["workspace_id"])
    op.create_table(
        "funnel_versions",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("funnel_id", FK, sa.ForeignKey("funnels.id", ondelete="CASCADE"), nullable=False),
        _ws(),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("definition", Json, nullable=False),
        sa.Column("reentry", sa.Boolean, nullable=False),
        sa.Column("published_at", UTCDateTime, nullable=False),
        sa.Column("published_by", FK, nullable=True),
        sa.UniqueConstraint("funnel_id", "number"),
    )

    op.create_table(
        "funnel_runs",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column("funnel_id", FK, sa.ForeignKey("funnels.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "version_id",
            FK,
            sa.ForeignKey("funnel_versions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("reentry", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("current_node", sa.String(64), nullable=False),
        sa.Column("wake_at", UTCDateTime, nullable=True),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("context", Json, nullable=False),
        sa.Column("waiting_event", sa.String(100), nullable=True),
        sa.Column("woken_by", sa.String(100), nullable=True),
        sa.Column("step_count", sa.Integer, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("entered_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("ended_at", UTCDateTime, nullable=True),
        sa.Column("exit_reason", sa.String(64), nullable=True),
    )
    op.create_index(
        "ux_funnel_runs_once",
        "funnel_runs",
        ["funnel_id", "contact_id"],
        unique=True,
        sqlite_where=sa.text("reentry = 0"),
        postgresql_where=sa.text("reentry = false"),
    )
    op.create_index(
        "ux_funnel_runs_active",
        "funnel_runs",
        ["funnel_id", "contact_id"],
        unique=True,
        sqlite_where=sa.text("status = 'active'"),
        postgresql_where=sa.text("status = 'active'"),
    )
    op.create_index(
        "ix_funnel_runs_due",
        "funnel_runs",
        ["wake_at"],
        sqlite_where=sa.text("status = 'active'"),
        postgresql_where=sa.text("status = 'active'"),
    )
    op.create_index("ix_funnel_runs_contact", "funnel_runs", ["contact_id"])
    op.create_index("ix_funnel_runs_funnel_status", "funnel_runs", ["funnel_id", "status"])
    op.create_index("ix_funnel_runs_version", "funnel_runs", ["version_id"])

    op.create_table(
        "funnel_steps",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "run_id", FK, sa.ForeignKey("funnel_runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("node_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("decision", sa.String(200), nullable=False),
        sa.Column("output", Json, nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_funnel_steps_run", "funnel_steps", ["run_id", "seq"])

    op.create_table(
        "funnel_outbox",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column(
            "run_id", FK, sa.ForeignKey("funnel_runs.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("node_id", sa.String(64), nullable=False),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=False, unique=True),
        sa.Column("payload", Json, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=False),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
    )
    op.create_index(
        "ix_funnel_outbox_due",
        "funnel_outbox",
        ["next_attempt_at"],
        sqlite_where=sa.text("status = 'pending'"),
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_funnel_outbox_run", "funnel_outbox", ["run_id"])
    op.create_index("ix_funnel_outbox_contact", "funnel_outbox", ["contact_id", "status"])

    op.create_table(
        "delivery_events",
        sa.Column("id", BigId, primary_key=True),
        _ws(),
        sa.Column(
            "outbox_id",
            FK,
            sa.ForeignKey("funnel_outbox.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "contact_id", FK, sa.ForeignKey("contacts.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_delivery_events_outbox", "delivery_events", ["outbox_id"])
    op.create_index("ix_delivery_events_contact", "delivery_events", ["contact_id", "at"])

    op.create_table(
        "funnel_throttle",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("window_start", UTCDateTime, primary_key=True),
        sa.Column("used", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "funnel_throttle",
        "delivery_events",
        "funnel_outbox",
        "funnel_steps",
        "funnel_runs",
        "funnel_versions",
        "funnels",
        "contact_events",
        "list_members",
        "contact_lists",
        "contact_tags",
        "tags",
        "contact_fields",
        "contacts",
    ):
        op.drop_table(table)
