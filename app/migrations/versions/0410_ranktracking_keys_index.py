"""Position tracking reports: the positions table's keys (each keyword and device's best position,
and whether a run the table shows measured it) read from one index alone. The new index extends
``ix_rt_results_best`` by the run, so it answers the best position as that one did, which goes.

Revision ID: 0410_ranktracking_keys_index
Revises: 0400_ranktracking_alerts
"""

from __future__ import annotations

from alembic import op

revision = "0410_ranktracking_keys_index"
down_revision = "0400_ranktracking_alerts"
branch_labels = None
depends_on = None

OLD = ["schedule_id", "keyword", "device", "position"]


def upgrade() -> None:
    op.create_index("ix_rt_results_keys", "rt_results", [*OLD, "run_id"])
    op.drop_index("ix_rt_results_best", table_name="rt_results")


def downgrade() -> None:
    op.create_index("ix_rt_results_best", "rt_results", OLD)
    op.drop_index("ix_rt_results_keys", table_name="rt_results")
