"""Units of work: the only place in the code base that commits.

``Database.read()`` yields a :data:`ReadSession` that is always rolled back. ``Database.write()``
yields a :class:`UnitOfWork` whose session commits when the block ends normally and rolls back (and
re-raises) when it raises; a failed commit is an error, never a silent success. Callbacks registered
with :meth:`UnitOfWork.after_commit` run only once the commit succeeded (used to publish jobs).
:meth:`UnitOfWork.attempt` is a savepoint inside the unit of work: a try that fails takes back only
its own writes, and the transaction goes on (a form that is refused is shown again from it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import NewType

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.db.engine import create_engines
from app.db.kept_connections import KeptConnections
from app.db.write_gate import WriteGate
from app.settings import DatabaseSettings

log = logging.getLogger(__name__)

ReadSession = NewType("ReadSession", AsyncSession)
"""A session that may only read. Functions that must not write take this type."""

WriteSession = NewType("WriteSession", ReadSession)
"""A session inside a unit of work; also accepted wherever a ReadSession is."""

AfterCommit = Callable[[], Awaitable[None]]


class UnitOfWork:
    """One transaction. Never call ``commit()`` yourself: leave the ``async with`` block."""

    def __init__(self, session: AsyncSession) -> None:
        self.session: WriteSession = WriteSession(ReadSession(session))
        self._after_commit: list[AfterCommit] = []

    def after_commit(self, callback: AfterCommit) -> None:
        """Run ``callback`` after a successful commit; dropped on rollback."""
        self._after_commit.append(callback)

    @asynccontextmanager
    async def attempt(self) -> AsyncIterator[None]:
        """Writes that stand or fall together inside the transaction (a SAVEPOINT).

        When the block raises, its writes are rolled back, the callbacks it registered with
        :meth:`after_commit` are dropped and the error propagates; the unit of work stays usable
        (on PostgreSQL too, where a failed statement would otherwise abort the whole transaction).
        Objects the block changed are expired, so read them again rather than reuse them.
        """
        registered = len(self._after_commit)
        try:
            async with self.session.begin_nested():
                yield
        except BaseException:
            del self._after_commit[registered:]
            raise

    async def _run_after_commit(self) -> None:
        callbacks, self._after_commit = self._after_commit, []
        for callback in callbacks:
            try:
                await callback()
            except Exception:
                log.exception("after-commit callback failed")


class ReadBlock:
    """The context of :meth:`Database.read`. A class, not an async generator: a request
    dependency holding one that is dropped unfinished (a sibling dependency refused the request)
    is closed by the dependency's own finaliser alone, where a nested generator would be
    finalised twice at once ("aclose(): asynchronous generator is already running")."""

    __slots__ = ("_session",)

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def __aenter__(self) -> ReadSession:
        await self._session.__aenter__()
        return ReadSession(self._session)

    async def __aexit__(self, *exc_info: object) -> None:
        # Closing the session ends its transaction (rolled back) and detaches the loaded objects
        # without expiring them, so they stay readable after the block. (The session's own exit
        # closes it shielded from cancellation.)
        await self._session.__aexit__(None, None, None)


class WriteBlock:
    """The context of :meth:`Database.write` (a class for the reason :class:`ReadBlock` is)."""

    __slots__ = ("_session", "_uow")

    def __init__(self, session: AsyncSession) -> None:
        self._session = session
        self._uow = UnitOfWork(session)

    async def __aenter__(self) -> UnitOfWork:
        await self._session.__aenter__()
        return self._uow

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        try:
            try:
                if exc_type is None:
                    await self._session.commit()
            except BaseException:
                await self._session.rollback()
                raise
            if exc_type is not None:
                await self._session.rollback()
        finally:
            await self._session.__aexit__(None, None, None)
        if exc_type is None:
            await self._uow._run_after_commit()


LONE_CONNECTIONS = 2
"""Connections kept for one-statement writes: a process's recorders of outcomes write one group
at a time each, and a few of them at once; more at a busy moment are opened and closed."""


class Database:
    """Engines and session factories for one database."""

    def __init__(self, settings: DatabaseSettings) -> None:
        self.settings = settings
        self.write_gate: WriteGate | None = (
            WriteGate(settings.busy_timeout_ms / 1000) if settings.is_sqlite else None
        )
        """SQLite: the line this process's write transactions wait in (app/db/write_gate.py)."""
        self.write_engine, self.read_engine = create_engines(settings, self.write_gate)
        self._write_factory = async_sessionmaker(self.write_engine, expire_on_commit=False)
        self._read_factory = async_sessionmaker(self.read_engine, expire_on_commit=False)
        self.lone_connections = KeptConnections(self, keep=LONE_CONNECTIONS)
        """PostgreSQL: where one-statement writes run (app/db/lone_statement.py)."""

    @property
    def dialect(self) -> str:
        return self.write_engine.dialect.name

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    def read(self) -> ReadBlock:
        """``async with db.read() as session``: a read-only session for the block."""
        return ReadBlock(self._read_factory())

    def write(self) -> WriteBlock:
        """``async with db.write() as uow``: a transaction committed when the block ends without
        an exception (then the after-commit callbacks run), rolled back otherwise."""
        return WriteBlock(self._write_factory())

    async def ping(self) -> bool:
        try:
            async with self.read_engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception:
            log.warning("database ping failed", exc_info=True)
            return False

    async def dispose(self) -> None:
        await self.lone_connections.aclose()  # checked out: the engine's disposal leaves them
        await self.write_engine.dispose()
        if self.read_engine is not self.write_engine:
            await self.read_engine.dispose()

    @property
    def engines(self) -> tuple[AsyncEngine, ...]:
        if self.read_engine is self.write_engine:
            return (self.write_engine,)
        return (self.write_engine, self.read_engine)
