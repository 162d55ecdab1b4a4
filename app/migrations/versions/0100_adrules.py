"""Ad rules: ad accounts, rules, rule accounts, tasks and batch records.

Revision ID: 0100_adrules
Revises: 0001_platform
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0100_adrules"
down_revision = "0001_platform"
branch_labels = ("adrules",)
depends_on = None


def _fk_id(target: str) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete="CASCADE")


def _ref() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "adrules_ad_accounts",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("workspace_id", _ref(), _fk_id("workspaces.id"), nullable=False),
        sa.Column("meta_id", sa.String(40), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("timezone_name", sa.String(64), nullable=False),
        sa.Column("account_status", sa.Integer, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("discovered_at", UTCDateTime, nullable=False),
        sa.Column("activated_at", UTCDateTime, nullable=True),
        sa.UniqueConstraint(
            "workspace_id", "meta_id", name="uq_adrules_ad_accounts_workspace_meta"
        ),
    )
    op.create_index("ix_adrules_ad_accounts_workspace_id", "adrules_ad_accounts", ["workspace_id"])

    op.create_table(
        "adrules_rules",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("workspace_id", _ref(), _fk_id("workspaces.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("prefilters", Json, nullable=False),
        sa.Column("schedule", Json, nullable=False),
        sa.Column("next_execution_at", UTCDateTime, nullable=True),
        sa.Column("window_starts_at", UTCDateTime, nullable=True),
        sa.Column("window_ends_at", UTCDateTime, nullable=True),
        sa.Column("last_dispatched_at", UTCDateTime, nullable=True),
        sa.Column("last_batch_id", sa.String(32), nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_adrules_rules_workspace_id", "adrules_rules", ["workspace_id"])
    # Only rules that can run are indexed: the 10-second sweep reads this index alone.
    op.create_index(
        "ix_adrules_rules_due",
        "adrules_rules",
        ["next_execution_at"],
        sqlite_where=sa.text("status = 'active'"),
        postgresql_where=sa.text("status = 'active'"),
    )

    op.create_table(
        "adrules_rule_accounts",
        sa.Column("rule_id", _ref(), _fk_id("adrules_rules.id"), primary_key=True),
        sa.Column("ad_account_id", _ref(), _fk_id("adrules_ad_accounts.id"), primary_key=True),
    )

    op.create_table(
        "adrules_tasks",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("rule_id", _ref(), _fk_id("adrules_rules.id"), nullable=False),
        sa.Column("workspace_id", _ref(), _fk_id("workspaces.id"), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("document", Json, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("archived_at", UTCDateTime, nullable=True),
    )
    op.create_index("ix_adrules_tasks_rule", "adrules_tasks", ["rule_id", "position"])
    op.create_index("ix_adrules_tasks_workspace_id", "adrules_tasks", ["workspace_id"])

    op.create_table(
        "adrules_batches",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("batch_id", sa.String(32), nullable=False),
        sa.Column("workspace_id", _ref(), _fk_id("workspaces.id"), nullable=False),
        sa.Column("rule_id", _ref(), _fk_id("adrules_rules.id"), nullable=False),
        sa.Column("ad_account_id", _ref(), _fk_id("adrules_ad_accounts.id"), nullable=False),
        sa.Column("account_meta_id", sa.String(40), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("entities", sa.Integer, nullable=False),
        sa.Column("pages", sa.Integer, nullable=False),
        sa.Column("fetch_attempts", sa.Integer, nullable=False),
        sa.Column("executed", sa.Integer, nullable=False),
        sa.Column("not_executed", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
        sa.Column("errors", sa.Integer, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("tick_at", UTCDateTime, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.UniqueConstraint("batch_id", "ad_account_id", name="uq_adrules_batches_batch_account"),
    )
    op.create_index("ix_adrules_batches_rule", "adrules_batches", ["rule_id", "created_at"])
    op.create_index(
        "ix_adrules_batches_workspace", "adrules_batches", ["workspace_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_table("adrules_batches")
    op.drop_table("adrules_tasks")
    op.drop_table("adrules_rule_accounts")
    op.drop_table("adrules_rules")
    op.drop_table("adrules_ad_accounts")
