"""Position tracking alerts and e-mail reports: alert rules per schedule, one delivery row per rule
and measured request (the key that makes an alert happen once per run), report settings per
schedule with the end of the period its next report covers, and one report row per period.

Revision ID: 0400_ranktracking_alerts
Revises: 0390_ranktracking_micros
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0400_ranktracking_alerts"
down_revision = "0390_ranktracking_micros"
branch_labels = None
depends_on = None


def _fk(column: str, target: str, *, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(column, BigId, sa.ForeignKey(target, ondelete="CASCADE"), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "rt_alert_rules",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id"),
        _fk("schedule_id", "rt_schedules.id"),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("threshold", sa.Integer, nullable=False),
        sa.Column("device", sa.String(8), nullable=True),
        sa.Column("channel", sa.String(10), nullable=False),
        sa.Column("recipients", Json, nullable=True),
        sa.Column("url", sa.Text, nullable=True),
        sa.Column("sealed_secret", sa.Text, nullable=True),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_rt_alert_rules_schedule", "rt_alert_rules", ["schedule_id", "id"])
    op.create_table(
        "rt_alert_deliveries",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id"),
        _fk("schedule_id", "rt_schedules.id"),
        _fk("rule_id", "rt_alert_rules.id"),
        _fk("request_id", "rt_requests.id"),
        sa.Column("channel", sa.String(10), nullable=False),
        sa.Column("matches", Json, nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("sent_at", UTCDateTime, nullable=True),
        sa.UniqueConstraint("rule_id", "request_id", name="uq_rt_alert_deliveries_rule_id"),
    )
    op.create_index("ix_rt_alert_deliveries_request", "rt_alert_deliveries", ["request_id"])
    op.create_table(
        "rt_report_settings",
        _fk("schedule_id", "rt_schedules.id"),
        _fk("workspace_id", "workspaces.id"),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("recipients", Json, nullable=True),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("next_due_at", UTCDateTime, nullable=False),
        sa.Column("last_claimed_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("schedule_id", name="pk_rt_report_settings"),
    )
    op.create_index(
        "ix_rt_report_settings_due",
        "rt_report_settings",
        ["next_due_at"],
        sqlite_where=sa.text("enabled"),
        postgresql_where=sa.text("enabled"),
    )
    op.create_table(
        "rt_report_deliveries",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id"),
        _fk("schedule_id", "rt_schedules.id"),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("period_start", UTCDateTime, nullable=False),
        sa.Column("period_end", UTCDateTime, nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("sent_at", UTCDateTime, nullable=True),
        sa.UniqueConstraint(
            "schedule_id", "period_start", name="uq_rt_report_deliveries_schedule_id"
        ),
    )


def downgrade() -> None:
    op.drop_table("rt_report_deliveries")
    op.drop_index("ix_rt_report_settings_due", table_name="rt_report_settings")
    op.drop_table("rt_report_settings")
    op.drop_table("rt_alert_deliveries")
    op.drop_table("rt_alert_rules")
