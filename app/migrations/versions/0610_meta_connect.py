"""Connect with Facebook (AR-29 to AR-32): the workspace's Meta connection and the login dialog's
one-time ``state`` values.

Revision ID: 0610_meta_connect
Revises: 0600_saved_segments
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0610_meta_connect"
down_revision = "0600_saved_segments"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adrules_meta_connections",
        sa.Column(
            "workspace_id",
            BigId,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("scopes", Json, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=True),
        sa.Column("checked_at", UTCDateTime, nullable=False),
        sa.CheckConstraint("source IN ('facebook_login', 'pasted')", name="source"),
    )
    op.create_table(
        "adrules_login_states",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("state_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("session_hash", sa.String(64), nullable=False),
        sa.Column(
            "workspace_id",
            BigId,
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        ),
        sa.Column("user_id", BigId, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("used_at", UTCDateTime, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("adrules_login_states")
    op.drop_table("adrules_meta_connections")
