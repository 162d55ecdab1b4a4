"""A batch ``INSERT … ON CONFLICT DO NOTHING RETURNING`` handed straight to the database driver.

For a hot path (the inbound events' group commit) the SQL layer's parameter and row handling cost
more per batch than the rest of the batch's Python, and a transaction adds BEGIN and COMMIT round
trips. :class:`DriverInsert` writes a batch as one statement in autocommit mode — atomic on its
own, committed as it ends — on connections it keeps between batches (a checkout from the pool
costs the pool's bookkeeping, and a ping when the connection sat idle: app/db/liveness.py). How
the statement is spelled is the dialect's business and stays here:

- PostgreSQL: the rows travel as one array per column (``SELECT * FROM unnest(...)``), so the
  statement's text is the same for every batch size and the driver prepares it once per
  connection.
- SQLite: a multi-row ``VALUES`` (the text differs by row count; the driver caches each), run in
  line with the process's write transactions (``app/db/write_gate.py``), with each value bound as
  its column type would bind it (UTC times in SQLAlchemy's SQLite storage format).

The caller names the table, its columns with their PostgreSQL types, and the columns returned;
rows are tuples in column order, JSON given as text and times as aware datetimes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from app.db.session import Database

TIMESTAMPTZ = "timestamptz"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    pg_type: str
    """The column's PostgreSQL type (``bigint``, ``varchar``, ``jsonb``, ``timestamptz``)."""


def sqlite_time(value: datetime) -> str:
    """What ``UTCDateTime`` stores on SQLite: naive UTC in SQLAlchemy's storage format, so the
    rows sort and compare as text like every other row's."""
    v = utc(value)
    return (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d} "
        f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}"
    )


def utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetime given to a UTC column")
    return value.astimezone(UTC)


class DriverInsert:
    """Batches of rows into ``table``, skipping a row that conflicts with one stored (the table's
    unique index decides), each batch one autocommitted statement; :meth:`insert` returns the
    ``returning`` columns of the rows stored."""

    def __init__(
        self, db: Database, table: str, columns: Sequence[Column], returning: Sequence[str]
    ) -> None:
        self.db = db
        self.columns = tuple(columns)
        names = ", ".join(c.name for c in self.columns)
        self._head = f"INSERT INTO {table} ({names}) "
        self._tail = f" ON CONFLICT DO NOTHING RETURNING {', '.join(returning)}"
        arrays = ", ".join(f"${n}::{c.pg_type}[]" for n, c in enumerate(self.columns, start=1))
        # Identifiers come from the caller's code, every value is a bound parameter.
        self._unnest = f"{self._head}SELECT * FROM unnest({arrays}){self._tail}"  # noqa: S608
        self._idle: list[tuple[AsyncConnection, Any]] = []
        """Connections (and their driver's connections) kept between two batches."""

    async def insert(self, rows: Sequence[tuple[Any, ...]]) -> list[Sequence[Any]]:
        """Write ``rows`` as one statement; the returned columns of each row stored."""
        if self.db.is_postgres:
            return await self._insert_postgres(rows)
        return await self._insert_sqlite(rows)

    async def _insert_postgres(self, rows: Sequence[tuple[Any, ...]]) -> list[Sequence[Any]]:
        by_column = [
            [utc(r[i]) if c.pg_type == TIMESTAMPTZ else r[i] for r in rows]
            for i, c in enumerate(self.columns)
        ]
        # A connection whose statement failed goes back to the pool (which drops it if it is
        # dead) rather than to the idle list.
        conn, driver = self._idle.pop() if self._idle else await self._connect()
        try:
            records = await driver.fetch(self._unnest, *by_column)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        self._idle.append((conn, driver))
        return list(records)

    async def _insert_sqlite(self, rows: Sequence[tuple[Any, ...]]) -> list[Sequence[Any]]:
        values: list[Any] = []
        for row in rows:
            values += (
                sqlite_time(v) if c.pg_type == TIMESTAMPTZ else v
                for c, v in zip(self.columns, row, strict=True)
            )
        one = "(" + ", ".join("?" * len(self.columns)) + ")"
        sql = f"{self._head}VALUES {', '.join([one] * len(rows))}{self._tail}"
        conn, driver = self._idle.pop() if self._idle else await self._connect()
        gate = self.db.write_gate
        try:
            # In line with the process's write transactions: outside it, the statement would
            # meet their lock in SQLite's busy handler, which looks again only every 100 ms
            # after a while and loses to every writer in line.
            async with gate.turn(driver) if gate is not None else contextlib.nullcontext():
                records = await driver.execute_fetchall(sql, values)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        self._idle.append((conn, driver))
        return list(records)

    async def _connect(self) -> tuple[AsyncConnection, Any]:
        conn = await self.db.write_engine.connect()
        if self.db.is_postgres:
            # Outside a transaction the driver commits each statement (autocommit). SQLite's
            # driver connections already are (app.db.engine); asking SQLAlchemy for it there
            # would reset them to implicit transactions when they go back to the pool.
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        return conn, driver

    async def aclose(self) -> None:
        """Close the connections kept between batches."""
        idle, self._idle = self._idle, []
        for conn, _driver in idle:
            with contextlib.suppress(Exception):
                await conn.close()
