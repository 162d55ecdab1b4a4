"""Ad rules: execution records and the database copy of custom-metric sheets.

Revision ID: 0101_adrules_records
Revises: 0100_adrules
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0101_adrules_records"
down_revision = "0100_adrules"
branch_labels = None
depends_on = None


def _ref() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _fk(target: str) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "adrules_records",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("workspace_id", _ref(), _fk("workspaces.id"), nullable=False),
        sa.Column("rule_id", _ref(), _fk("adrules_rules.id"), nullable=False),
        sa.Column("task_id", _ref(), _fk("adrules_tasks.id"), nullable=False),
        sa.Column("ad_account_id", _ref(), _fk("adrules_ad_accounts.id"), nullable=False),
        sa.Column("batch_id", sa.String(32), nullable=False),
        sa.Column("campaign_id", sa.String(40), nullable=False),
        sa.Column("campaign_name", sa.String(400), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("parameters", Json, nullable=False),
        sa.Column("before", Json, nullable=True),
        sa.Column("after", Json, nullable=True),
        sa.Column("conditions", Json, nullable=False),
        sa.Column("steps", Json, nullable=False),
        sa.Column("elapsed_seconds", sa.Float, nullable=False),
        sa.Column("next_permitted_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_adrules_records_batch", "adrules_records", ["workspace_id", "batch_id"])
    op.create_index(
        "ix_adrules_records_cooldown",
        "adrules_records",
        ["task_id", "campaign_id", "created_at"],
        sqlite_where=sa.text("status = 'executed'"),
        postgresql_where=sa.text("status = 'executed'"),
    )
    op.create_table(
        "adrules_sheet_copies",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("workspace_id", _ref(), _fk("workspaces.id"), nullable=False),
        sa.Column("spreadsheet_id", sa.String(100), nullable=False),
        sa.Column("sheet_name", sa.String(100), nullable=False),
        sa.Column("rows", Json, nullable=False),
        sa.Column("fetched_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint(
            "workspace_id", "spreadsheet_id", "sheet_name", name="uq_adrules_sheet_copies_sheet"
        ),
    )


def downgrade() -> None:
    op.drop_table("adrules_sheet_copies")
    op.drop_index("ix_adrules_records_cooldown", table_name="adrules_records")
    op.drop_index("ix_adrules_records_batch", table_name="adrules_records")
    op.drop_table("adrules_records")
