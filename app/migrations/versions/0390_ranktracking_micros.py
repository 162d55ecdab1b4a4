"""Position tracking: money in integer micro-euros, and reconciliation entries.

Provider prices are far below a cent (a SERP page costs 0.0006 USD), so balances, reservations,
settlements and ledger amounts move from whole cents to integer micro-euros (1 EUR = 1,000,000):
exact on SQLite and PostgreSQL alike, where a ``Numeric`` column would be a float on SQLite.
Existing amounts are multiplied by 10,000. The monthly cap stays in whole cents (it is entered so).
Ledger entries of kind ``reconcile`` need no schema change (the kind is a string).

Revision ID: 0390_ranktracking_micros
Revises: 0340_ranktracking_best_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0390_ranktracking_micros"
down_revision = "0340_ranktracking_best_index"
branch_labels = None
depends_on = None

_FACTOR = 10_000

_COLUMNS = {
    "rt_runs": ("reserved", "settled"),
    "rt_balances": ("credits", "settled", "reserved"),
    "rt_ledger": ("amount",),
}
_CHECKS = {
    "rt_balances": (
        "ck_rt_balances_not_negative",
        "credits_{u} - settled_{u} - reserved_{u} >= 0",
    ),
    "rt_ledger": ("ck_rt_ledger_amount_positive", "amount_{u} >= 0"),
}


def _name(name: str, *, as_0300: bool) -> str:
    """0300 passed full names through the naming convention, which prefixed them again
    (``ck_rt_balances_ck_rt_balances_not_negative``); from here the names are the models' own."""
    return name if as_0300 else op.f(name)


def _convert(old: str, new: str, scaled: str, *, upgrading: bool) -> None:
    """Rename every amount column from ``*_old`` to ``*_new`` and set it to ``scaled`` (a SQL
    expression of ``{c}``, the column)."""
    for table, columns in _COLUMNS.items():
        check = _CHECKS.get(table)
        with op.batch_alter_table(table) as batch:
            if check is not None:
                batch.drop_constraint(_name(check[0], as_0300=upgrading), type_="check")
            for column in columns:
                batch.alter_column(f"{column}_{old}", new_column_name=f"{column}_{new}")
        assignments = ", ".join(f"{c}_{new} = " + scaled.format(c=f"{c}_{new}") for c in columns)
        op.execute(sa.text(f"UPDATE {table} SET {assignments}"))  # noqa: S608 - fixed names
        if check is not None:
            with op.batch_alter_table(table) as batch:
                batch.create_check_constraint(
                    _name(check[0], as_0300=not upgrading), check[1].format(u=new)
                )


def upgrade() -> None:
    _convert("cents", "micros", f"{{c}} * {_FACTOR}", upgrading=True)


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM rt_ledger WHERE kind = 'reconcile'"))
    # Whole cents again, each amount rounded up (a reservation must still cover its charge).
    _convert("micros", "cents", f"({{c}} + {_FACTOR - 1}) / {_FACTOR}", upgrading=False)
