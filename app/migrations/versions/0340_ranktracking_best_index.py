"""Position tracking reports: an index that answers the best position per keyword and device of
a schedule without reading the results (the positions table asks it on every page).

Revision ID: 0340_ranktracking_best_index
Revises: 0330_ranktracking_targets
"""

from __future__ import annotations

from alembic import op

revision = "0340_ranktracking_best_index"
down_revision = "0330_ranktracking_targets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_rt_results_best", "rt_results", ["schedule_id", "keyword", "device", "position"]
    )


def downgrade() -> None:
    op.drop_index("ix_rt_results_best", table_name="rt_results")
