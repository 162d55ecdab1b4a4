"""Ad rules: a rule's level — ``campaign`` (every rule so far), ``adset`` or ``ad`` — the objects
it reads and acts on.

Revision ID: 0104_adrules_levels
Revises: 0103_adrules_shadow
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0104_adrules_levels"
down_revision = "0103_adrules_shadow"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("adrules_rules") as batch:
        batch.add_column(
            sa.Column("level", sa.String(16), nullable=False, server_default="campaign")
        )


def downgrade() -> None:
    with op.batch_alter_table("adrules_rules") as batch:
        batch.drop_column("level")
