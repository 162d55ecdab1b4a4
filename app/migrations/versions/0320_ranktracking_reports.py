"""Position tracking reports: competitor domains per schedule (copied onto each child run when it
is admitted, like the tracked domain), and per result the competitors' positions read from the same
SERP page and the SERP features the tracked domain owns.

Revision ID: 0320_ranktracking_reports
Revises: 0310_ranktracking_poller
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import Json

revision = "0320_ranktracking_reports"
down_revision = "0310_ranktracking_poller"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rt_schedules") as batch:
        batch.add_column(sa.Column("competitors", Json, nullable=True))
    with op.batch_alter_table("rt_runs") as batch:
        batch.add_column(sa.Column("competitors", Json, nullable=True))
    with op.batch_alter_table("rt_results") as batch:
        batch.add_column(sa.Column("competitors", Json, nullable=True))
        batch.add_column(sa.Column("owned_features", Json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rt_results") as batch:
        batch.drop_column("owned_features")
        batch.drop_column("competitors")
    with op.batch_alter_table("rt_runs") as batch:
        batch.drop_column("competitors")
    with op.batch_alter_table("rt_schedules") as batch:
        batch.drop_column("competitors")
