"""Campaigns: ``transactional`` (a notice every recipient must get: exempt from marketing
opt-outs, never from a bounce or a complaint), and a CHECK that a recipient's status is one the
sender writes (its ``detail`` carries the consent gate's reason when it is ``skipped``).

Revision ID: 0420_funnels_consent_gate
Revises: 0270_funnels_audience_job
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0420_funnels_consent_gate"
down_revision = "0270_funnels_audience_job"
branch_labels = None
depends_on = None

STATUS_CHECK = "ck_campaign_recipients_status"


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(
            sa.Column("transactional", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("campaign_recipients") as batch:
        batch.create_check_constraint(
            STATUS_CHECK, "status IN ('pending', 'sent', 'skipped', 'failed')"
        )


def downgrade() -> None:
    with op.batch_alter_table("campaign_recipients") as batch:
        batch.drop_constraint(STATUS_CHECK, type_="check")
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("transactional")
