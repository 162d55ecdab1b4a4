"""Ad rules: the runtime stop switches (per organisation and per workspace) and the index the
cross-rule guards read (executed changes of one object across all rules).

Revision ID: 0102_adrules_safety
Revises: 0101_adrules_records
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, UTCDateTime

revision = "0102_adrules_safety"
down_revision = "0101_adrules_records"
branch_labels = None
depends_on = None


def _ref() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _fk(target: str) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "adrules_stops",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("scope_key", sa.String(40), nullable=False),
        sa.Column("organisation_id", _ref(), _fk("organisations.id"), nullable=False),
        sa.Column("workspace_id", _ref(), _fk("workspaces.id"), nullable=True),
        sa.Column("reason", sa.String(500), nullable=False),
        sa.Column("stopped_by", sa.String(200), nullable=False),
        sa.Column("stopped_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("scope_key", name="uq_adrules_stops_scope_key"),
    )
    op.create_index("ix_adrules_stops_organisation", "adrules_stops", ["organisation_id"])
    op.create_index(
        "ix_adrules_records_object_changes",
        "adrules_records",
        ["ad_account_id", "campaign_id", "created_at"],
        sqlite_where=sa.text("status = 'executed'"),
        postgresql_where=sa.text("status = 'executed'"),
    )


def downgrade() -> None:
    op.drop_index("ix_adrules_records_object_changes", table_name="adrules_records")
    op.drop_index("ix_adrules_stops_organisation", table_name="adrules_stops")
    op.drop_table("adrules_stops")
