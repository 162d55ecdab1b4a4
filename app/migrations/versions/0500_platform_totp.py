"""Two-factor sign-in: authenticator secrets, recovery codes, an organisation's requirement.

Revision ID: 0500_platform_totp
Revises: 0480_job_attempts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0500_platform_totp"
down_revision = "0490_platform_audit_log"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "user_totp",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("user_id", _ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("secret_encrypted", sa.LargeBinary, nullable=False),
        sa.Column("confirmed_at", UTCDateTime, nullable=True),
        sa.Column("last_used_step", sa.BigInteger, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("user_id", name="uq_user_totp_user_id"),
    )
    op.create_table(
        "user_recovery_codes",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("user_id", _ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("used_at", UTCDateTime, nullable=True),
    )
    op.create_index("ix_user_recovery_codes_user_id", "user_recovery_codes", ["user_id"])
    op.create_table(
        "organisation_security",
        sa.Column(
            "organisation_id",
            _ID,
            sa.ForeignKey("organisations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("two_factor_required", sa.String(24), nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.CheckConstraint(
            "two_factor_required IN ('off', 'owners_and_admins', 'everyone')",
            name="ck_organisation_security_two_factor_required",
        ),
    )


def downgrade() -> None:
    op.drop_table("organisation_security")
    op.drop_index("ix_user_recovery_codes_user_id", table_name="user_recovery_codes")
    op.drop_table("user_recovery_codes")
    op.drop_table("user_totp")
