"""Position tracking: the provider's locations, synced from its locations list (RT-60).

Revision ID: 0520_ranktracking_locations
Revises: 0480_job_attempts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import UTCDateTime

revision = "0520_ranktracking_locations"
down_revision = "0500_platform_totp"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rt_locations",
        sa.Column("code", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("search_text", sa.Text, nullable=False),
        sa.Column("parent_code", sa.Integer, nullable=True),
        sa.Column("country_iso", sa.String(8), nullable=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("synced_at", UTCDateTime, nullable=False),
        sa.Column("dropped_at", UTCDateTime, nullable=True),
    )
    op.create_index("ix_rt_locations_country", "rt_locations", ["country_iso"])


def downgrade() -> None:
    op.drop_index("ix_rt_locations_country", table_name="rt_locations")
    op.drop_table("rt_locations")
