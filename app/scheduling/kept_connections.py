"""The PostgreSQL autocommit connections a database queue keeps between its leases.

A lease, a completion or a heartbeat is one statement, atomic on its own: in autocommit mode it
needs no ``BEGIN``/``COMMIT``, two round trips fewer per batch. Connections are kept between
statements (up to :data:`KEPT_CONNECTIONS`): a checkout from the pool costs the pool's
bookkeeping, and a ping round trip when the connection sat idle (:mod:`app.db.liveness`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from app.db.session import Database

KEPT_CONNECTIONS = 4
"""Autocommit connections a PostgreSQL queue keeps between leases: one for each leasing loop of a
process by default (``JOB_LEASE_LOOPS``); a busier process opens more and closes the extra ones."""


class KeptConnections:
    """Autocommit connections to ``db``, kept between uses."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._kept: list[AsyncConnection] = []

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection where each statement commits on its own. One whose statement raised is
        closed instead of kept (it may be broken); the next use opens a fresh one."""
        conn = self._kept.pop() if self._kept else await self._connect()
        try:
            yield conn
        except BaseException:
            with suppress(Exception):
                await conn.close()
            raise
        if len(self._kept) < KEPT_CONNECTIONS:
            self._kept.append(conn)
        else:
            await conn.close()

    async def _connect(self) -> AsyncConnection:
        conn = await self.db.write_engine.connect()
        return await conn.execution_options(isolation_level="AUTOCOMMIT")

    async def aclose(self) -> None:
        kept, self._kept = self._kept, []
        for conn in kept:
            with suppress(Exception):
                await conn.close()
