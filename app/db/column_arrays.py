"""Many rows in one statement, spelled for the dialect: on PostgreSQL one array per column
(``unnest``) or one JSON document of the rows (``jsonb_to_recordset``), elsewhere the SQL layer's
executemany.

For a hot path the SQL layer's per-row parameter handling (each value through its column type's
bind processing) can cost more than the rest of the batch's Python. On PostgreSQL the caller's
statement goes to the driver as plain SQL text with its arguments, in the session's own
transaction and through the connection's statement events like any other statement. The
statement text is the same for every batch size, so the driver prepares it once per connection.
One list per column is encoded by the driver in C, but element by element, each checked for its
type; a JSON document of the rows (:func:`json_text` of a list of dicts) is one string, written by
msgspec in C and read by PostgreSQL, the cheaper of the two for a wide row (the runner's batch
writes, :mod:`app.engines.funnels.runs.work.batch_writes`)"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy.sql import Executable

from app.db.dialect import POSTGRESQL, dialect_name
from app.db.driver_insert import utc
from app.db.session import WriteSession

_JSON = msgspec.json.Encoder()


def json_text(document: Any) -> str:
    """The document as JSON text for a ``jsonb`` array element: msgspec writes it about ten times
    faster than the column type's ``json.dumps``, compact and with non-ASCII characters as they
    are, and it reads back as the same document."""
    return _JSON.encode(document).decode()


def utc_or_none(value: datetime | None) -> datetime | None:
    """A time for a ``timestamptz`` array element (aware, in UTC), or ``None``."""
    return None if value is None else utc(value)


@dataclass(frozen=True, slots=True)
class ColumnArrays:
    """A PostgreSQL statement with ``$n`` placeholders and its arguments: one list per column or
    one JSON document of the rows, and any single values it takes after them."""

    sql: str
    args: tuple[Any, ...]


async def execute_rows(
    session: WriteSession,
    statement: Executable,
    rows: Iterable[dict[str, Any]],
    arrays: Callable[[], ColumnArrays],
) -> None:
    """``statement`` for every row of ``rows``; on PostgreSQL ``arrays()`` instead, the same
    change in one statement (``rows`` is then not read: a generator costs nothing there)."""
    if dialect_name(session) != POSTGRESQL:
        await session.execute(statement, list(rows))
        return
    spelled = arrays()
    connection = await session.connection()
    await connection.exec_driver_sql(spelled.sql, spelled.args)


async def fetch_rows(
    session: WriteSession,
    statement: Executable,
    rows: Iterable[dict[str, Any]],
    arrays: Callable[[], ColumnArrays],
) -> list[Any]:
    """:func:`execute_rows` for a statement that returns rows (``RETURNING``): the rows it
    returned, in the order the statement wrote them."""
    if dialect_name(session) != POSTGRESQL:
        return list((await session.execute(statement, list(rows))).all())
    spelled = arrays()
    connection = await session.connection()
    return list((await connection.exec_driver_sql(spelled.sql, spelled.args)).all())
