"""Platform: sweeper state records which tick finished and when a tick last succeeded.

A tick whose runner died is claimed and finished under different conditions than one that ran to
its end (``finished_tick_at``), and readiness asks when a sweep last completed a tick without an
error (``last_succeeded_at``).

Revision ID: 0003_sweep_takeover
Revises: 0002_idempotency
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import UTCDateTime

revision = "0003_sweep_takeover"
down_revision = "0002_idempotency"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweeper_state") as batch:
        batch.add_column(sa.Column("finished_tick_at", UTCDateTime, nullable=True))
        batch.add_column(sa.Column("last_succeeded_at", UTCDateTime, nullable=True))
    # Ticks recorded before this revision all ran to their end or were abandoned long ago.
    op.execute("UPDATE sweeper_state SET finished_tick_at = last_tick_at")


def downgrade() -> None:
    with op.batch_alter_table("sweeper_state") as batch:
        batch.drop_column("last_succeeded_at")
        batch.drop_column("finished_tick_at")
