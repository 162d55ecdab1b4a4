"""Platform: organisation roles, API-key scopes and expiry, invitations, first-run setup.

Revision ID: 0003_accounts
Revises: 0002_idempotency
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0003_accounts"
down_revision = "0002_idempotency"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(
            sa.Column("org_role", sa.String(16), nullable=False, server_default="member")
        )
    # Existing organisations: their first person becomes the owner, workspace admins admins.
    op.execute(
        "UPDATE users SET org_role = 'admin' WHERE id IN "
        "(SELECT user_id FROM memberships WHERE role = 'admin')"
    )
    op.execute(
        "UPDATE users SET org_role = 'owner' WHERE id IN "
        "(SELECT MIN(id) FROM users GROUP BY organisation_id)"
    )
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("scope", sa.String(8), nullable=False, server_default="write"))
        batch.add_column(sa.Column("expires_at", UTCDateTime, nullable=True))
    op.create_table(
        "invitations",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "organisation_id",
            _ID,
            sa.ForeignKey("organisations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "workspace_id", _ID, sa.ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("invited_by", _ID, sa.ForeignKey("users.id", ondelete="SET NULL")),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("accepted_at", UTCDateTime),
        sa.Column("revoked_at", UTCDateTime),
        sa.UniqueConstraint("token_hash", name="uq_invitations_token_hash"),
    )
    op.create_index("ix_invitations_organisation_id", "invitations", ["organisation_id"])
    op.create_table(
        "instance_setup",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("completed_at", UTCDateTime, nullable=False),
    )
    # An instance that already has people is set up.
    op.execute(
        "INSERT INTO instance_setup (id, completed_at) "
        "SELECT 1, MIN(created_at) FROM users HAVING COUNT(*) > 0"
    )


def downgrade() -> None:
    op.drop_table("instance_setup")
    op.drop_index("ix_invitations_organisation_id", table_name="invitations")
    op.drop_table("invitations")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("scope")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("org_role")
