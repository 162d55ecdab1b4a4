"""Ad rules: the zone a run used on every batch and record, the attribution window of every record,
and each rule's chosen attribution window (AR-41, AR-44).

Revision ID: 0560_adrules_zones_bids_windows
Revises: 0550_adrules_digests_approvals
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import Json

revision = "0560_adrules_zones_bids_windows"
down_revision = "0550_adrules_digests_approvals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("adrules_rules") as batch:
        batch.add_column(sa.Column("attribution_windows", Json, nullable=True))
    with op.batch_alter_table("adrules_batches") as batch:
        batch.add_column(sa.Column("timezone", sa.String(64), nullable=True))
    with op.batch_alter_table("adrules_records") as batch:
        batch.add_column(sa.Column("timezone", sa.String(64), nullable=True))
        batch.add_column(sa.Column("attribution", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("adrules_records") as batch:
        batch.drop_column("attribution")
        batch.drop_column("timezone")
    with op.batch_alter_table("adrules_batches") as batch:
        batch.drop_column("timezone")
    with op.batch_alter_table("adrules_rules") as batch:
        batch.drop_column("attribution_windows")
