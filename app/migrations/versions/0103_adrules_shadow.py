"""Ad rules: shadow rules. The sweep takes ``shadow`` rules like active ones (the partial due index
covers both), a batch says whether it was a shadow run (its records tell what would have been
done; nothing was written), and a shadow rule's cooldowns read its ``would_execute`` records
through their own partial index.

Revision ID: 0103_adrules_shadow
Revises: 0102_adrules_safety
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0103_adrules_shadow"
down_revision = "0102_adrules_safety"
branch_labels = None
depends_on = None


def _due_index(where: str) -> None:
    op.create_index(
        "ix_adrules_rules_due",
        "adrules_rules",
        ["next_execution_at"],
        sqlite_where=sa.text(where),
        postgresql_where=sa.text(where),
    )


def upgrade() -> None:
    with op.batch_alter_table("adrules_batches") as batch:
        batch.add_column(
            sa.Column("shadow", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.drop_index("ix_adrules_rules_due", table_name="adrules_rules")
    _due_index("status IN ('active', 'shadow')")
    op.create_index(
        "ix_adrules_records_shadow_cooldown",
        "adrules_records",
        ["task_id", "campaign_id", "created_at"],
        sqlite_where=sa.text("status = 'would_execute'"),
        postgresql_where=sa.text("status = 'would_execute'"),
    )


def downgrade() -> None:
    op.drop_index("ix_adrules_records_shadow_cooldown", table_name="adrules_records")
    op.drop_index("ix_adrules_rules_due", table_name="adrules_rules")
    _due_index("status = 'active'")
    with op.batch_alter_table("adrules_batches") as batch:
        batch.drop_column("shadow")
