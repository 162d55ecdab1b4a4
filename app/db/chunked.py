"""Deletes that may touch many rows, in bounded chunks.

One ``DELETE`` of every finished job of a busy day, or of every expired counter, would hold the
SQLite write lock (and on PostgreSQL, row locks and a long transaction) for as long as it runs.
:func:`delete_in_chunks` removes at most ``chunk_rows`` rows per statement, each chunk its own
short transaction (``DELETE … WHERE key IN (SELECT key … LIMIT n)``), and steps back from the
database between chunks for as long as the chunk held it on SQLite, so other writers get in. A
crash between chunks leaves only whole chunks deleted; running it again finishes the rest (the
predicate says what is to go, not a list of rows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, tuple_

from app.clock import loop_time
from app.db.dialect import row_count

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Delete, Select, Table

    from app.db.session import Database

CHUNK_ROWS = 1000
MIN_PAUSE_SECONDS = 0.005


async def delete_in_chunks(
    db: Database,
    table: Table,
    where: ColumnElement[bool],
    *,
    key: Sequence[Any],
    chunk_rows: int = CHUNK_ROWS,
) -> int:
    """Delete the rows of ``table`` matching ``where``, ``chunk_rows`` at a time; returns how
    many went. ``key`` names the columns that identify a row (its primary key)."""
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be positive")
    statement = chunk_delete(table, where, key=key, chunk_rows=chunk_rows)
    total = 0
    while True:
        began = loop_time()
        async with db.write() as uow:
            gone = row_count(await uow.session.execute(statement))
        total += gone
        if gone < chunk_rows:
            return total
        held = loop_time() - began
        await asyncio.sleep(0 if db.is_postgres else max(MIN_PAUSE_SECONDS, held))


def chunk_selection(
    where: ColumnElement[bool], *, key: Sequence[Any], chunk_rows: int = CHUNK_ROWS
) -> Select[Any]:
    """The rows one chunk deletes: the first ``chunk_rows`` keys matching ``where``."""
    return select(*key).where(where).limit(chunk_rows)


def chunk_delete(
    table: Table, where: ColumnElement[bool], *, key: Sequence[Any], chunk_rows: int = CHUNK_ROWS
) -> Delete:
    """One chunk's ``DELETE … WHERE key IN (SELECT key … LIMIT n)``."""
    columns = list(key)
    target = columns[0] if len(columns) == 1 else tuple_(*columns)
    chosen = chunk_selection(where, key=columns, chunk_rows=chunk_rows)
    return delete(table).where(target.in_(chosen))
