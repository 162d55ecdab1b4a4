"""A change written as one statement on its own, outside any transaction, where that saves trips.

A transaction costs a round trip for ``BEGIN`` and one for ``COMMIT`` besides its statements. A
change that fits one statement (a data-modifying ``WITH``: move these rows, insert their records)
is atomic by itself: on PostgreSQL :func:`write_alone` sends it in autocommit mode, one round trip,
committed as it ends, straight to the driver on a connection kept for such writes
(:mod:`app.db.kept_connections`): checking a connection out of the pool and going through the SQL
layer cost four times the Python of the statement itself. Elsewhere it writes nothing and answers
None, and the caller writes the same change in a unit of work (on SQLite a transaction costs no
round trip).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.db.column_arrays import ColumnArrays
from app.db.session import Database


async def write_alone(
    db: Database, spelled: Callable[[], ColumnArrays]
) -> list[Sequence[Any]] | None:
    """Run ``spelled()`` by itself in autocommit mode on PostgreSQL and answer the rows it
    returns (none for a statement without ``RETURNING``); elsewhere answer None without writing
    anything."""
    if not db.is_postgres:
        return None
    statement = spelled()
    async with db.lone_connections.driver() as driver:
        return [tuple(row) for row in await driver.fetch(statement.sql, *statement.args)]
