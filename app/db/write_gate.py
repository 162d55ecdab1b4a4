"""The order in which one process's writers get SQLite's write lock: the order they asked for it.

SQLite has one write lock and no queue for it. A writer that finds it taken sleeps in its busy
handler and looks again — after 1, 2, 5 … ms, then every 100 ms until ``busy_timeout`` — so
whoever happens to look just after the holder commits wins, and a writer that has waited a
while (looking only every 100 ms) keeps losing to writers that have just arrived. Measured on a
loaded two-core machine with an import running beside the API, the sweeps and the queue worker:
no transaction held the lock for much more than a second, yet writers waited up to 4.4 s, and
one past the 5 s ``busy_timeout`` answers "database is locked" — a 503 to a person, a failed
tick for a sweep.

The gate puts one process's writers in line before ``BEGIN IMMEDIATE``: an ``asyncio.Lock``
(first come, first served) taken when a write transaction begins and given back when it ends,
so the write lock passes from one writer of the process to the next at once and in turn. Other
processes on the same file still meet SQLite's own busy handler. A writer waits in line at most
``patience_seconds`` (the busy timeout); past that it goes to SQLite without the gate, which
answers as it did before — the gate can make a writer wait in turn, never for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator

log = logging.getLogger(__name__)


class WriteGate:
    """First come, first served among one process's write transactions (per event loop)."""

    def __init__(self, patience_seconds: float) -> None:
        self.patience_seconds = patience_seconds
        self._lines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._held: dict[int, asyncio.Lock] = {}
        """The line each transaction in the gate holds, by the id of its driver connection."""
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Transactions waiting in line."""
        return self._waiting

    @property
    def holders(self) -> int:
        """Transactions holding the gate (0 or 1; one that ran out of patience went on without)."""
        return len(self._held)

    async def enter(self, holder: object) -> None:
        """Wait for ``holder``'s turn (a connection beginning a write transaction)."""
        if id(holder) in self._held:
            return  # its transaction already holds the gate (a new BEGIN on the same connection)
        loop = asyncio.get_running_loop()
        line = self._lines.get(loop)
        if line is None:
            line = self._lines[loop] = asyncio.Lock()
        self._waiting += 1
        try:
            async with asyncio.timeout(self.patience_seconds):
                await line.acquire()
        except TimeoutError:
            log.warning(
                "waited %.1f s in line for the write lock; trying without the gate",
                self.patience_seconds,
            )
            return
        finally:
            self._waiting -= 1
        self._held[id(holder)] = line

    def leave(self, holder: object) -> None:
        """``holder``'s transaction ended (committed, rolled back or its connection lost)."""
        line = self._held.pop(id(holder), None)
        if line is not None:
            line.release()

    @contextlib.asynccontextmanager
    async def turn(self, holder: object) -> AsyncIterator[None]:
        """``holder``'s turn for one statement that takes the write lock outside a transaction
        the engine began (an autocommit statement sent straight to the driver): it waits in the
        same line as the transactions and leaves it when the statement has ended."""
        await self.enter(holder)
        try:
            yield
        finally:
            self.leave(holder)
