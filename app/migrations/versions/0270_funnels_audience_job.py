"""Funnels: a campaign remembers the bulk job that takes a large audience's snapshot in chunks
(status ``materialising`` until it is complete).

Revision ID: 0270_funnels_audience_job
Revises: 0260_funnels_webhook_sources
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0270_funnels_audience_job"
down_revision = "0260_funnels_webhook_sources"
branch_labels = None
depends_on = None

FK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("audience_job_id", FK, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("audience_job_id")
