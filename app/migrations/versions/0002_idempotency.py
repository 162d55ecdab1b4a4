"""Platform: stored answers of requests made with an Idempotency-Key.

Revision ID: 0002_idempotency
Revises: 0001_platform
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0002_idempotency"
down_revision = "0001_platform"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("id", BigId, primary_key=True),
        sa.Column(
            "workspace_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=False),
        sa.Column("response_body", sa.LargeBinary, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("workspace_id", "key", name="uq_idempotency_keys_workspace_id"),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_expires_at", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
