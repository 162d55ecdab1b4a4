"""Ad rules: one digest per run and channel, and changes held for approval (AR-27, AR-28).

Revision ID: 0550_adrules_digests_approvals
Revises: 0520_ranktracking_locations
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0550_adrules_digests_approvals"
down_revision = "0520_ranktracking_locations"
branch_labels = None
depends_on = None

_DIGEST_STATUSES = "status IN ('sending', 'sent', 'failed', 'skipped')"
_PROPOSAL_STATUSES = (
    "status IN ('pending', 'approved', 'executed', 'skipped', 'failed', 'rejected', 'expired')"
)


def _fk(target: str) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete="CASCADE")


def upgrade() -> None:
    with op.batch_alter_table("adrules_rules") as batch:
        batch.add_column(sa.Column("approval", Json, nullable=True))
    op.create_table(
        "adrules_digests",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("workspace_id", BigId, _fk("workspaces.id"), nullable=False),
        sa.Column("rule_id", BigId, _fk("adrules_rules.id"), nullable=False),
        sa.Column("batch_id", sa.String(32), nullable=False),
        sa.Column("channel_key", sa.String(32), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("objects", sa.Integer, nullable=False),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("sent_at", UTCDateTime, nullable=True),
        sa.UniqueConstraint("batch_id", "channel_key", name="uq_adrules_digests_batch_channel"),
        sa.CheckConstraint(_DIGEST_STATUSES, name="status"),
    )
    op.create_index(
        "ix_adrules_digests_workspace", "adrules_digests", ["workspace_id", "created_at"]
    )
    op.create_table(
        "adrules_proposals",
        sa.Column("id", BigId, primary_key=True),
        sa.Column("workspace_id", BigId, _fk("workspaces.id"), nullable=False),
        sa.Column("rule_id", BigId, _fk("adrules_rules.id"), nullable=False),
        sa.Column("task_id", BigId, _fk("adrules_tasks.id"), nullable=False),
        sa.Column("ad_account_id", BigId, _fk("adrules_ad_accounts.id"), nullable=False),
        sa.Column("batch_id", sa.String(32), nullable=False),
        sa.Column("campaign_id", sa.String(40), nullable=False),
        sa.Column("campaign_name", sa.String(400), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("write", Json, nullable=False),
        sa.Column("before", Json, nullable=True),
        sa.Column("after", Json, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=True),
        sa.Column("decided_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint(
            "batch_id", "task_id", "campaign_id", name="uq_adrules_proposals_batch_task_object"
        ),
        sa.CheckConstraint(_PROPOSAL_STATUSES, name="status"),
    )
    op.create_index(
        "ix_adrules_proposals_workspace_batch", "adrules_proposals", ["workspace_id", "batch_id"]
    )
    op.create_index(
        "ix_adrules_proposals_pending",
        "adrules_proposals",
        ["expires_at"],
        sqlite_where=sa.text("status = 'pending'"),
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_adrules_proposals_pending_object",
        "adrules_proposals",
        ["task_id", "campaign_id"],
        sqlite_where=sa.text("status = 'pending'"),
        postgresql_where=sa.text("status = 'pending'"),
    )


def downgrade() -> None:
    op.drop_index("ix_adrules_proposals_pending_object", table_name="adrules_proposals")
    op.drop_index("ix_adrules_proposals_pending", table_name="adrules_proposals")
    op.drop_index("ix_adrules_proposals_workspace_batch", table_name="adrules_proposals")
    op.drop_table("adrules_proposals")
    op.drop_index("ix_adrules_digests_workspace", table_name="adrules_digests")
    op.drop_table("adrules_digests")
    with op.batch_alter_table("adrules_rules") as batch:
        batch.drop_column("approval")
