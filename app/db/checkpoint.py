"""SQLite write-ahead-log checkpoints, off the write path.

A checkpoint copies the log's pages back into the database file and ends with an fsync of that
file. By default SQLite runs it inside whichever commit brings the log to 1,000 pages, so that
commit — and every writer queued behind it for the single write lock — waits for the disk: 19 ms
at the median and 180 ms at worst for 4 MB on this kind of machine. Under ingestion load those
commits were the slowest answers (a p99 of 224 ms where the batch statement itself takes 7 ms).

:class:`WalCheckpointer` checkpoints in the background instead: every ``interval_seconds``, on a
connection of its own, in PASSIVE mode (it neither waits for nor blocks readers and writers; the
fsync happens in that connection's thread). The log stays short, and the commits' own threshold,
raised to :data:`AUTOCHECKPOINT_PAGES`, is only a safety net for processes that run no
checkpointer (the command-line tools, tests) or a checkpointer that falls behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger(__name__)

AUTOCHECKPOINT_PAGES = 4000
"""``PRAGMA wal_autocheckpoint`` of every connection: a commit checkpoints itself only once the
log holds this many pages (16 MB at SQLite's 4 KB pages)."""

INTERVAL_SECONDS = 1.0
"""How often the background checkpointer runs."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What one ``PRAGMA wal_checkpoint`` reported."""

    busy: bool
    """Another checkpoint was running, or a reader kept it from finishing."""
    log_frames: int
    """Pages in the log."""
    checkpointed_frames: int
    """Of those, pages now copied into the database file."""


class WalCheckpointer:
    """Checkpoints one SQLite database's log every ``interval_seconds`` (see the module)."""

    def __init__(self, engine: AsyncEngine, *, interval_seconds: float = INTERVAL_SECONDS) -> None:
        self.engine = engine
        self.interval_seconds = interval_seconds
        self.last: Checkpoint | None = None
        """What the latest checkpoint reported."""
        self._conn: tuple[AsyncConnection, Any] | None = None

    async def checkpoint(self) -> Checkpoint:
        """One PASSIVE checkpoint: copy what no reader still needs, wait for nothing."""
        conn, driver = self._conn or await self._connect()
        try:
            # Straight to the driver, outside any transaction: a checkpoint cannot run inside
            # one, and SQLAlchemy would begin one for the statement.
            row = await (await driver.execute("PRAGMA wal_checkpoint(PASSIVE)")).fetchone()
        except BaseException:
            self._conn = None
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        busy, log_frames, checkpointed = row
        self.last = Checkpoint(bool(busy), int(log_frames), int(checkpointed))
        return self.last

    async def run(self) -> None:
        """Checkpoint every interval until cancelled; a failed checkpoint is logged and the next
        one tries again on a new connection."""
        try:
            while True:
                await asyncio.sleep(self.interval_seconds)
                try:
                    await self.checkpoint()
                except Exception:
                    log.warning("background WAL checkpoint failed", exc_info=True)
        finally:
            await self.aclose()

    async def _connect(self) -> tuple[AsyncConnection, Any]:
        conn = await self.engine.connect()
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        self._conn = (conn, driver)
        return self._conn

    async def aclose(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn[0], None
            with contextlib.suppress(Exception):
                await conn.close()
