"""Every status column holds only its entity's states: a CHECK constraint on each ``status`` /
``state`` column that had none (the tables that already have one keep theirs).

The states are written out here as they stand at this revision (the code declares them once,
in each entity's ``states`` module; the schema tests compare the two). Every state the code
ever wrote is listed, so the rows already there satisfy the constraints.

Revision ID: 0670_state_checks
Revises: 0660_ranktracking_geogrids
"""

from __future__ import annotations

from alembic import op

revision = "0670_state_checks"
down_revision = "0660_ranktracking_geogrids"
branch_labels = None
depends_on = None

CHECKS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("bulk_jobs", "status", ("queued", "running", "done", "failed", "cancelled")),
    ("adrules_rules", "status", ("draft", "active", "shadow", "paused", "archived")),
    (
        "adrules_records",
        "status",
        ("executed", "not_executed", "skipped", "error", "would_execute", "proposed"),
    ),
    ("funnel_runs", "status", ("active", "completed", "exited", "cancelled", "failed")),
    ("funnel_outbox", "status", ("pending", "sent", "failed", "cancelled", "skipped")),
    (
        "campaigns",
        "status",
        ("draft", "scheduled", "materialising", "sending", "done", "cancelled"),
    ),
    ("rt_schedules", "status", ("active", "paused_user", "paused_balance", "archived")),
    (
        "rt_runs",
        "status",
        (
            "dispatching",
            "running",
            "succeeded",
            "partial",
            "failed",
            "skipped_balance",
            "skipped_dispatch",
        ),
    ),
    ("rt_runs", "reservation_state", ("none", "held", "settled", "released")),
    ("rt_results", "state", ("pending", "retrieved", "no_data", "failed")),
    ("rt_alert_deliveries", "state", ("pending", "sending", "sent", "failed")),
    ("rt_report_deliveries", "state", ("pending", "sent", "failed")),
    ("rt_geogrids", "status", ("reserved", "posting", "collecting", "done", "failed")),
    ("rt_geogrids", "reservation_state", ("none", "held", "settled", "released")),
    ("rt_geogrid_cells", "state", ("new", "posted", "found", "absent", "failed")),
)


def _condition(column: str, states: tuple[str, ...]) -> str:
    return "{} IN ({})".format(column, ", ".join(f"'{s}'" for s in states))


def _tables() -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    tables: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for table, column, states in CHECKS:
        tables.setdefault(table, []).append((column, states))
    return tables


def upgrade() -> None:
    # One batch per table: on SQLite each is one rebuild of the table, whatever it holds.
    for table, columns in _tables().items():
        with op.batch_alter_table(table) as batch:
            for column, states in columns:
                batch.create_check_constraint(
                    op.f(f"ck_{table}_{column}"), _condition(column, states)
                )


def downgrade() -> None:
    for table, columns in reversed(_tables().items()):
        with op.batch_alter_table(table) as batch:
            for column, _ in reversed(columns):
                batch.drop_constraint(op.f(f"ck_{table}_{column}"), type_="check")
