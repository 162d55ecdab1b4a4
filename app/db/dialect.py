"""The few statements SQLite and PostgreSQL spell differently, in one place.

Both dialects support ``INSERT … ON CONFLICT`` with the same SQLAlchemy API, but each has its own
``insert()`` construct; and a driver's ``rowcount`` is an attribute some results lack. Engine code
calls these helpers with whatever it holds (a session, a connection, a :class:`Database` or a
dialect name) and never tests the dialect itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import ARRAY, any_, bindparam
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

if TYPE_CHECKING:
    from sqlalchemy.sql.dml import Insert

    ConflictInsert = postgresql.Insert | sqlite.Insert

POSTGRESQL = "postgresql"
SQLITE = "sqlite"


def dialect_name(bind: Any) -> str:
    """The dialect name of a session, connection, engine, :class:`Database` or a name itself."""
    if isinstance(bind, str):
        return bind
    dialect = getattr(bind, "dialect", None)
    if isinstance(dialect, str):  # app.db.session.Database
        return dialect
    if dialect is not None:
        return str(dialect.name)
    get_bind = getattr(bind, "get_bind", None)
    if get_bind is not None:  # a (read or write) session
        return str(get_bind().dialect.name)
    raise TypeError(f"cannot tell the SQL dialect of {bind!r}")


def is_postgres(bind: Any) -> bool:
    return dialect_name(bind) == POSTGRESQL


def concurrent_writers(bind: Any) -> bool:
    """Whether write transactions run side by side (PostgreSQL) rather than one at a time
    (SQLite's single writer): running writers concurrently only pays off on the former."""
    return is_postgres(bind)


def insert(bind: Any, table: Any) -> ConflictInsert:
    """The dialect's ``INSERT`` construct, which knows ``on_conflict_do_nothing/update``."""
    if dialect_name(bind) == POSTGRESQL:
        return postgresql.insert(table)
    return sqlite.insert(table)


def insert_ignoring(bind: Any, table: Any, conflict: Iterable[Any] | None = None) -> Insert:
    """``INSERT … ON CONFLICT [(conflict)] DO NOTHING``: a row that exists already is skipped."""
    statement: Any = insert(bind, table)
    index = list(conflict) if conflict is not None else None
    ignoring: Insert = statement.on_conflict_do_nothing(index_elements=index)
    return ignoring


def upsert(
    bind: Any,
    table: Any,
    *,
    conflict: Iterable[Any],
    update: Iterable[str] | Mapping[str, Any],
    where: Any = None,
) -> Insert:
    """``INSERT … ON CONFLICT (conflict) DO UPDATE``.

    ``update`` names the columns that take the proposed row's value (``excluded.col``), or maps
    columns to expressions computed from the existing row (an expression that needs the proposed
    row builds the statement with :func:`insert` and its ``excluded`` columns instead).
    """
    statement: Any = insert(bind, table)
    if isinstance(update, Mapping):
        values = dict(update)
    else:
        values = {name: statement.excluded[name] for name in update}
    upserting: Insert = statement.on_conflict_do_update(
        index_elements=list(conflict), set_=values, where=where
    )
    return upserting


def row_count(result: Any) -> int:
    """Rows an ``UPDATE``/``DELETE``/``INSERT`` touched (0 when the driver does not say)."""
    return int(getattr(result, "rowcount", 0) or 0)


def one_of(bind: Any, column: Any, keys: Iterable[Any]) -> ColumnElement[bool]:
    """``column`` is one of ``keys``. On PostgreSQL ``column = ANY($n)``, one array parameter:
    the same statement text for any number of keys (prepared once per connection) and the list
    encoded by the driver in C, where ``IN`` takes a parameter per key, each through the SQL
    layer's bind handling, and is a new statement for every length. ``IN`` elsewhere."""
    test: ColumnElement[bool]
    if dialect_name(bind) == POSTGRESQL:
        test = column == any_(bindparam(None, list(keys), type_=ARRAY(column.type)))
    else:
        test = column.in_(list(keys))
    return test
