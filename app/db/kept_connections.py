"""PostgreSQL autocommit connections kept between one-statement writes.

A write that is one statement (a lease, a completion, a group of outcomes) is atomic on its own:
in autocommit mode it needs no ``BEGIN``/``COMMIT``, two round trips fewer. Its connection is kept
between statements instead of checked out of the pool each time: a checkout and its return cost
more Python than the statement's own round trip (the pool's bookkeeping, a connection object and a
greenlet for each step). Up to ``keep`` connections are kept; a busier moment opens more and
closes the extra ones.

The driver's own connection is at hand too (:meth:`KeptConnections.driver`), for the statements
worth sending straight to it: the SQL layer's parameter and row handling cost more than the
statement (its statement cache prepares each statement once per connection).

A kept connection is not in the pool, so the pool's check of connections that sat idle
(:mod:`app.db.liveness`) does not see it: the same check is made here, with the same bound. One
whose use raised is discarded, not kept nor given back to the pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.clock import SystemClock
from app.db.liveness import IDLE_SECONDS

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from app.db.session import Database


@dataclass(slots=True)
class _Kept:
    conn: AsyncConnection
    driver: Any
    """The driver's connection under ``conn`` (asyncpg's)."""
    returned_at: float


class KeptConnections:
    """Autocommit connections to ``db`` (PostgreSQL), kept between uses."""

    def __init__(
        self,
        db: Database,
        *,
        keep: int,
        idle_seconds: float = IDLE_SECONDS,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self.db = db
        self.keep = keep
        self.idle_seconds = idle_seconds
        self._monotonic = monotonic or SystemClock().monotonic
        self._kept: list[_Kept] = []

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection where each statement commits on its own."""
        async with self._use() as kept:
            yield kept.conn

    @asynccontextmanager
    async def driver(self) -> AsyncIterator[Any]:
        """The driver's connection (asyncpg's) under such a connection."""
        async with self._use() as kept:
            yield kept.driver

    @asynccontextmanager
    async def _use(self) -> AsyncIterator[_Kept]:
        kept = await self._take()
        try:
            yield kept
        except BaseException:
            await _discard(kept)
            raise
        if len(self._kept) < self.keep:
            kept.returned_at = self._monotonic()
            self._kept.append(kept)
        else:
            await kept.conn.close()

    async def _take(self) -> _Kept:
        while self._kept:
            kept = self._kept.pop()
            if self._monotonic() - kept.returned_at < self.idle_seconds:
                return kept  # used a moment ago: as alive as a check would say
            try:
                await kept.driver.execute("SELECT 1")
            except Exception:
                await _discard(kept)  # closed while idle (the server restarted): replaced
                continue
            return kept
        conn = await self.db.write_engine.connect()
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        driver = (await conn.get_raw_connection()).driver_connection
        return _Kept(conn, driver, self._monotonic())

    async def aclose(self) -> None:
        kept, self._kept = self._kept, []
        for one in kept:
            with suppress(Exception):
                await one.conn.close()


async def _discard(kept: _Kept) -> None:
    """Close a connection whose use raised, for good: whether it is still whole is not known (the
    server may have closed it, or a cancelled statement left it mid-protocol), and given back to
    the pool it would be handed out again unchecked."""
    with suppress(Exception):
        await kept.conn.invalidate()
    with suppress(Exception):
        await kept.conn.close()
