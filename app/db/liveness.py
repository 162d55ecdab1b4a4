"""Whether a pooled PostgreSQL connection is still alive, checked only when it may not be.

SQLAlchemy's ``pool_pre_ping`` checks every connection at every checkout, and on asyncpg its check
is a transaction of its own (``BEGIN``, an empty statement, ``ROLLBACK``): three round trips ahead
of every transaction, more than a one-statement transaction makes itself (``BEGIN``, the statement,
``COMMIT``). A connection given back to the pool a moment ago is as alive as such a check would
say, so only one that sat idle in the pool for :data:`IDLE_SECONDS` or longer is checked before it
is handed out. One that fails the check is replaced before the transaction begins (the pool
discards it on :class:`~sqlalchemy.exc.DisconnectionError` and opens another).

A connection the server closed within that bound (the database restarted a moment ago) fails its
transaction's first statement instead; SQLAlchemy recognises the disconnect and discards every
connection of the pool older than it, so a restart costs the transactions in flight at that moment
and the few that take a connection before the first failure is seen, not one per pooled connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import AsyncEngine

from app.clock import SystemClock

IDLE_SECONDS = 5.0
"""A connection idle in the pool this long is checked before it is handed out again."""

_RETURNED_AT = "sweepline_returned_at"
"""Where a pooled connection's record keeps when it was last given back (monotonic seconds)."""


def check_when_idle(
    engine: AsyncEngine,
    *,
    idle_seconds: float | None = None,
    monotonic: Callable[[], float] | None = None,
) -> None:
    """Ping a connection of ``engine``'s pool at checkout when it sat idle ``idle_seconds`` or
    longer (instead of ``pool_pre_ping``'s check at every checkout); :data:`IDLE_SECONDS` and the
    system's monotonic clock unless given."""
    pool, dialect = engine.sync_engine.pool, engine.dialect
    bound = IDLE_SECONDS if idle_seconds is None else idle_seconds
    clock = monotonic or SystemClock().monotonic

    def on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = clock()

    def on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned_at = record.info.pop(_RETURNED_AT, None)
        if returned_at is None or clock() - returned_at < bound:
            return  # opened just now, or given back a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, dbapi_connection, None):
                raise exc.DisconnectionError(f"a pooled connection was closed: {error}") from error
            raise

    event.listen(pool, "checkin", on_checkin)
    event.listen(pool, "checkout", on_checkout)
