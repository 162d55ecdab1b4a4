"""Position tracking reports: the page that should rank, per keyword of a SERP schedule.

Revision ID: 0330_ranktracking_targets
Revises: 0320_ranktracking_reports
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import Json

revision = "0330_ranktracking_targets"
down_revision = "0320_ranktracking_reports"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rt_schedules") as batch:
        batch.add_column(sa.Column("target_urls", Json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rt_schedules") as batch:
        batch.drop_column("target_urls")
