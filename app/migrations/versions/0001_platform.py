"""Platform: tenancy, secrets, the durable job queue and the sweepers' state.

Revision ID: 0001_platform
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0001_platform"
down_revision = None
branch_labels = ("platform",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "organisations",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "workspaces",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "organisation_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("organisations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("ingest_token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("webhook_secret_encrypted", sa.LargeBinary, nullable=False),
        sa.Column("allow_private_http", sa.Boolean, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_workspaces_organisation_id", "workspaces", ["organisation_id"])
    op.create_table(
        "users",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "organisation_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("organisations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("email", sa.String(320), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("password_hash", sa.String(200), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_users_organisation_id", "users", ["organisation_id"])
    op.create_table(
        "memberships",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "workspace_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("role", sa.String(16), nullable=False),
        sa.UniqueConstraint("user_id", "workspace_id", name="uq_memberships_user_id"),
    )
    op.create_index("ix_memberships_workspace_id", "memberships", ["workspace_id"])
    op.create_table(
        "api_keys",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("last_used_at", UTCDateTime, nullable=True),
        sa.Column("revoked_at", UTCDateTime, nullable=True),
    )
    op.create_index("ix_api_keys_workspace_id", "api_keys", ["workspace_id"])
    op.create_index("ix_api_keys_prefix", "api_keys", ["prefix"])
    op.create_table(
        "user_sessions",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column(
            "user_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "workspace_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_user_sessions_user_id", "user_sessions", ["user_id"])
    op.create_table(
        "secrets",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("workspace_id", "name", name="uq_secrets_workspace_id"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("queue", sa.String(50), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("max_tries", sa.Integer, nullable=False),
        sa.Column("run_at", UTCDateTime, nullable=False),
        sa.Column("lease_expires_at", UTCDateTime, nullable=True),
        sa.Column("leased_by", sa.String(100), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
    )
    op.create_index(
        "ix_jobs_leasable",
        "jobs",
        ["queue", "priority", "run_at"],
        sqlite_where=sa.text("status = 'queued'"),
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_index(
        "ix_jobs_running_lease",
        "jobs",
        ["lease_expires_at"],
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_index("ix_jobs_status_finished", "jobs", ["status", "finished_at"])
    op.create_table(
        "sweeper_state",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("last_tick_at", UTCDateTime, nullable=True),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("last_started_at", UTCDateTime, nullable=True),
        sa.Column("last_finished_at", UTCDateTime, nullable=True),
        sa.Column("last_duration_ms", sa.Integer, nullable=True),
        sa.Column("last_lag_ms", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("ticks", sa.Integer, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "sweeper_state",
        "jobs",
        "secrets",
        "user_sessions",
        "api_keys",
        "memberships",
        "users",
        "workspaces",
        "organisations",
    ):
        op.drop_table(table)
