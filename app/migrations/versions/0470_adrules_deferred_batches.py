"""Ad rules: a batch record may be ``deferred`` (the dispatch tick's budget ran out before the
account's campaigns arrived; the next tick fetches it first, with the rest of its deadline, kept
in ``fetch_waited_ms``). The status column gets a CHECK constraint naming every status, and a
partial index finds the deferred records.

Revision ID: 0470_adrules_deferred_batches
Revises: 0104_adrules_levels
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0470_adrules_deferred_batches"
down_revision = "0104_adrules_levels"
branch_labels = None
depends_on = None

_STATUSES = ("queued", "empty", "skipped", "running", "completed", "failed", "deferred")
_WHERE = "status = 'deferred'"


def _check(statuses: tuple[str, ...]) -> str:
    return "status IN ({})".format(", ".join(f"'{s}'" for s in statuses))


def upgrade() -> None:
    with op.batch_alter_table("adrules_batches") as batch:
        batch.add_column(
            sa.Column("fetch_waited_ms", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.create_check_constraint(op.f("ck_adrules_batches_status"), _check(_STATUSES))
        batch.create_check_constraint(
            op.f("ck_adrules_batches_fetch_waited_ms"), "fetch_waited_ms >= 0"
        )
    op.create_index(
        "ix_adrules_batches_deferred",
        "adrules_batches",
        ["tick_at", "id"],
        sqlite_where=sa.text(_WHERE),
        postgresql_where=sa.text(_WHERE),
    )


def downgrade() -> None:
    op.drop_index("ix_adrules_batches_deferred", table_name="adrules_batches")
    # A deferred account's fetch is abandoned: recorded as skipped, saying why.
    op.execute(
        sa.text(
            "UPDATE adrules_batches SET status = 'skipped', "
            "error = 'deferred fetch abandoned by a schema downgrade' WHERE status = 'deferred'"
        )
    )
    with op.batch_alter_table("adrules_batches") as batch:
        batch.drop_constraint(op.f("ck_adrules_batches_fetch_waited_ms"), type_="check")
        batch.drop_constraint(op.f("ck_adrules_batches_status"), type_="check")
        batch.drop_column("fetch_waited_ms")
