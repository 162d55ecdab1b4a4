"""Position tracking: keyword lists, schedules, requests, child runs, results, ledger, balances,
activity feed.

Revision ID: 0300_ranktracking
Revises: 0001_platform
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0300_ranktracking"
down_revision = "0001_platform"
branch_labels = ("ranktracking",)
depends_on = None

FK_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ACTIVE_RUN = "status IN ('dispatching', 'running')"


def _fk(column: str, target: str, *, ondelete: str | None, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(column, FK_ID, sa.ForeignKey(target, ondelete=ondelete), nullable=nullable)


def _partial(condition: str) -> dict[str, Any]:
    return {"sqlite_where": sa.text(condition), "postgresql_where": sa.text(condition)}


def upgrade() -> None:
    op.create_table(
        "rt_keyword_lists",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id", ondelete="CASCADE"),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("workspace_id", "name", name="uq_rt_keyword_lists_workspace_id"),
    )
    op.create_table(
        "rt_list_keywords",
        sa.Column("id", BigId, primary_key=True),
        _fk("list_id", "rt_keyword_lists.id", ondelete="CASCADE"),
        sa.Column("keyword", sa.String(200), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("list_id", "keyword", name="uq_rt_list_keywords_list_id"),
    )
    op.create_table(
        "rt_schedules",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id", ondelete="CASCADE"),
        _fk("organisation_id", "organisations.id", ondelete="CASCADE"),
        _fk("owner_user_id", "users.id", ondelete="SET NULL", nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        _fk("list_id", "rt_keyword_lists.id", ondelete=None, nullable=True),
        sa.Column("keywords", Json, nullable=True),
        sa.Column("data_type", sa.String(16), nullable=False),
        sa.Column("frequency", sa.String(16), nullable=False),
        sa.Column("depth", sa.Integer, nullable=True),
        sa.Column("location_code", sa.Integer, nullable=True),
        sa.Column("language_code", sa.String(8), nullable=True),
        sa.Column("domain", sa.String(253), nullable=True),
        sa.Column("devices", sa.String(20), nullable=True),
        sa.Column("packages", Json, nullable=True),
        sa.Column("monthly_cap_cents", sa.BigInteger, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("dedup_key", sa.String(200), nullable=True),
        sa.Column("anchor_at", UTCDateTime, nullable=False),
        sa.Column("next_due_at", UTCDateTime, nullable=False),
        sa.Column("retrying", sa.Boolean, nullable=False),
        sa.Column("consecutive_blocks", sa.Integer, nullable=False),
        sa.Column("consecutive_failures", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("archived_at", UTCDateTime, nullable=True),
        sa.CheckConstraint(
            "monthly_cap_cents IS NULL OR monthly_cap_cents >= 500",
            name="ck_rt_schedules_cap_min",
        ),
    )
    op.create_index("ix_rt_schedules_list_id", "rt_schedules", ["list_id"])
    op.create_index(
        "uq_rt_schedules_dedup",
        "rt_schedules",
        ["workspace_id", "dedup_key"],
        unique=True,
        **_partial("status != 'archived' AND dedup_key IS NOT NULL"),
    )
    op.create_index(
        "ix_rt_schedules_due", "rt_schedules", ["next_due_at"], **_partial("status = 'active'")
    )
    op.create_index("ix_rt_schedules_workspace_status", "rt_schedules", ["workspace_id", "status"])

    op.create_table(
        "rt_requests",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id", ondelete="CASCADE"),
        _fk("schedule_id", "rt_schedules.id", ondelete="CASCADE"),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("queue", sa.String(16), nullable=False),
        sa.Column("due_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_rt_requests_schedule", "rt_requests", ["schedule_id", "id"])

    op.create_table(
        "rt_runs",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id", ondelete="CASCADE"),
        _fk("schedule_id", "rt_schedules.id", ondelete="CASCADE"),
        _fk("request_id", "rt_requests.id", ondelete="CASCADE"),
        sa.Column("data_type", sa.String(16), nullable=False),
        sa.Column("device", sa.String(8), nullable=True),
        sa.Column("queue", sa.String(16), nullable=False),
        sa.Column("depth", sa.Integer, nullable=True),
        sa.Column("location_code", sa.Integer, nullable=True),
        sa.Column("language_code", sa.String(8), nullable=True),
        sa.Column("domain", sa.String(253), nullable=True),
        sa.Column("packages", Json, nullable=True),
        sa.Column("keywords", Json, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("error_code", sa.String(40), nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("requested", sa.Integer, nullable=False),
        sa.Column("retrieved", sa.Integer, nullable=False),
        sa.Column("no_data", sa.Integer, nullable=False),
        sa.Column("reserved_cents", sa.BigInteger, nullable=False),
        sa.Column("settled_cents", sa.BigInteger, nullable=True),
        sa.Column("reservation_state", sa.String(10), nullable=False),
        sa.Column("provider_cost", sa.Numeric(14, 6), nullable=True),
        sa.Column("polls", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_rt_runs_request", "rt_runs", ["request_id"])
    op.create_index("ix_rt_runs_schedule", "rt_runs", ["schedule_id", "id"])
    op.create_index("ix_rt_runs_active", "rt_runs", ["updated_at"], **_partial(ACTIVE_RUN))
    op.create_index(
        "ix_rt_runs_held", "rt_runs", ["schedule_id"], **_partial("reservation_state = 'held'")
    )

    op.create_table(
        "rt_results",
        sa.Column("id", BigId, primary_key=True),
        _fk("run_id", "rt_runs.id", ondelete="CASCADE"),
        _fk("schedule_id", "rt_schedules.id", ondelete="CASCADE"),
        sa.Column("keyword", sa.String(200), nullable=False),
        sa.Column("device", sa.String(8), nullable=True),
        sa.Column("task_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("position", sa.Integer, nullable=True),
        sa.Column("url", sa.Text, nullable=True),
        sa.Column("features", Json, nullable=True),
        sa.Column("data", Json, nullable=True),
        sa.Column("error_code", sa.String(40), nullable=True),
        sa.Column("fetched_at", UTCDateTime, nullable=True),
        sa.UniqueConstraint("run_id", "keyword", name="uq_rt_results_run_id"),
    )
    op.create_index("ix_rt_results_task", "rt_results", ["task_id"])
    op.create_index("ix_rt_results_history", "rt_results", ["schedule_id", "keyword", "id"])

    op.create_table(
        "rt_balances",
        _fk("organisation_id", "organisations.id", ondelete="CASCADE"),
        sa.Column("credits_cents", sa.BigInteger, nullable=False),
        sa.Column("settled_cents", sa.BigInteger, nullable=False),
        sa.Column("reserved_cents", sa.BigInteger, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("organisation_id", name="pk_rt_balances"),
        sa.CheckConstraint(
            "credits_cents - settled_cents - reserved_cents >= 0",
            name="ck_rt_balances_not_negative",
        ),
    )

    op.create_table(
        "rt_ledger",
        sa.Column("id", BigId, primary_key=True),
        _fk("organisation_id", "organisations.id", ondelete="CASCADE"),
        _fk("workspace_id", "workspaces.id", ondelete="SET NULL", nullable=True),
        _fk("schedule_id", "rt_schedules.id", ondelete="SET NULL", nullable=True),
        _fk("run_id", "rt_runs.id", ondelete="SET NULL", nullable=True),
        _fk("reservation_id", "rt_ledger.id", ondelete=None, nullable=True),
        sa.Column("kind", sa.String(12), nullable=False),
        sa.Column("amount_cents", sa.BigInteger, nullable=False),
        sa.Column("provider_cost", sa.Numeric(14, 6), nullable=True),
        sa.Column("note", sa.String(300), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("reservation_id", "kind", name="uq_rt_ledger_reservation_id"),
        sa.CheckConstraint("amount_cents >= 0", name="ck_rt_ledger_amount_positive"),
    )
    op.create_index("ix_rt_ledger_org", "rt_ledger", ["organisation_id", "id"])
    op.create_index("ix_rt_ledger_run", "rt_ledger", ["run_id"])
    op.create_index("ix_rt_ledger_schedule", "rt_ledger", ["schedule_id", "kind", "created_at"])

    op.create_table(
        "rt_activity",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id", ondelete="CASCADE"),
        _fk("schedule_id", "rt_schedules.id", ondelete="CASCADE", nullable=True),
        _fk("run_id", "rt_runs.id", ondelete="CASCADE", nullable=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("code", sa.String(40), nullable=True),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_rt_activity_workspace", "rt_activity", ["workspace_id", "id"])


def downgrade() -> None:
    for table in (
        "rt_activity",
        "rt_ledger",
        "rt_balances",
        "rt_results",
        "rt_runs",
        "rt_requests",
        "rt_schedules",
        "rt_list_keywords",
        "rt_keyword_lists",
    ):
        op.drop_table(table)
