"""Async engines for SQLite (embedded default) and PostgreSQL (server mode).

SQLite gets two engines on the same file: a *write* engine whose transactions start with
``BEGIN IMMEDIATE`` (the write lock is taken up front, so two writers queue on ``busy_timeout`` instead
of failing with "database is locked" when a read transaction tries to upgrade), and a *read* engine
whose transactions start with a plain deferred ``BEGIN`` so readers never wait for writers (WAL).
The write engine's transactions queue for the lock in the order they began
(:mod:`app.db.write_gate`): SQLite's own busy handler serves no one in turn.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db import session_kinds
from app.db.checkpoint import AUTOCHECKPOINT_PAGES
from app.db.json_codec import decode_document
from app.db.liveness import check_when_idle
from app.db.write_gate import WriteGate
from app.settings import DatabaseSettings


def _sqlite_pragmas(
    settings: DatabaseSettings, begin: str, gate: WriteGate | None
) -> tuple[Any, Any]:
    busy_timeout_ms = settings.busy_timeout_ms

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" event below: the driver's own implicit
        # BEGIN would be DEFERRED and would not cover SELECT statements.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # WAL: readers never block the writer and the writer never blocks readers.
        cursor.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable across application crashes in WAL mode and ~3x faster than FULL.
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints run in the background (app/db/checkpoint.py); a commit runs one itself
        # only when the log has grown well past what the background keeps it to.
        cursor.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
        # Wait for the write lock instead of failing at once with SQLITE_BUSY.
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        # SQLite ignores foreign keys unless asked, per connection.
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    def on_begin(conn: Any) -> None:
        driver = conn.connection.dbapi_connection
        # The busy timeout of this session's kind (app/db/session_kinds.py), set only when it
        # changes on this connection.
        busy = session_kinds.timeouts(settings, session_kinds.current_kind()).sqlite_busy_ms
        info = conn.connection.info
        if info.get("busy_timeout_ms", busy_timeout_ms) != busy:
            conn.exec_driver_sql(f"PRAGMA busy_timeout={int(busy)}")
            info["busy_timeout_ms"] = busy
        if gate is not None:
            # In line with the process's other writers first (see app/db/write_gate.py); the
            # event runs inside SQLAlchemy's greenlet, where the driver's run_async may await.
            driver.run_async(lambda _raw: gate.enter(driver))
        try:
            conn.exec_driver_sql(begin)
        except BaseException:
            if gate is not None:
                gate.leave(driver)
            raise

    return on_connect, on_begin


def _leave_the_gate_at_the_end(engine: AsyncEngine, gate: WriteGate) -> None:
    """Give the gate back when a write transaction ends: at its COMMIT or ROLLBACK, and in any
    case when its connection goes back to the pool or is lost."""

    def on_end(conn: Any) -> None:
        with contextlib.suppress(Exception):  # a connection already lost has left at invalidate
            gate.leave(conn.connection.dbapi_connection)

    def on_returned(dbapi_connection: Any, *_: Any) -> None:
        if dbapi_connection is not None:
            gate.leave(dbapi_connection)

    event.listen(engine.sync_engine, "commit", on_end)
    event.listen(engine.sync_engine, "rollback", on_end)
    event.listen(engine.sync_engine, "checkin", on_returned)
    event.listen(engine.sync_engine, "invalidate", on_returned)


def private_sqlite_file(raw_url: str) -> None:
    """Create the SQLite file readable by its owner only (0600) before SQLite opens it, and
    tighten an existing one: it holds password hashes, encrypted secrets and contacts. SQLite
    gives its -wal and -shm files the database file's permissions.

    An existing file is never opened here: SQLite's locks are POSIX locks, which a process loses
    on *every* descriptor of the file the moment it closes any one of them. Opening and closing
    the file beside a live connection (a second engine in the same process) would drop that
    connection's locks, and another process closing its last connection would then delete the
    -wal and -shm files under it (later connections fail with "disk I/O error")."""
    url = make_url(raw_url)
    if not url.get_backend_name().startswith("sqlite") or url.database in (None, "", ":memory:"):
        return
    path = Path(url.database)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if candidate.exists() and candidate.stat().st_mode & 0o077:
            candidate.chmod(0o600)


def _sqlite_engine(settings: DatabaseSettings, begin: str, gate: WriteGate | None) -> AsyncEngine:
    url = make_url(settings.url)
    private_sqlite_file(settings.url)
    engine = create_async_engine(url, echo=settings.echo, json_deserializer=decode_document)
    on_connect, on_begin = _sqlite_pragmas(settings, begin, gate)
    event.listen(engine.sync_engine, "connect", on_connect)
    event.listen(engine.sync_engine, "begin", on_begin)
    if gate is not None:
        _leave_the_gate_at_the_end(engine, gate)
    return engine


def create_engines(
    settings: DatabaseSettings, gate: WriteGate | None = None
) -> tuple[AsyncEngine, AsyncEngine]:
    """Return ``(write_engine, read_engine)``; the same engine twice on PostgreSQL. On SQLite,
    the write engine's transactions go through ``gate`` when one is given."""
    if settings.is_sqlite:
        return (
            _sqlite_engine(settings, "BEGIN IMMEDIATE", gate),
            _sqlite_engine(settings, "BEGIN", None),
        )
    if not settings.url.startswith("postgresql+asyncpg"):
        raise ValueError("DATABASE_URL must use sqlite+aiosqlite or postgresql+asyncpg")
    engine = create_async_engine(
        settings.url,
        echo=settings.echo,
        json_deserializer=decode_document,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_size,
        # A request's and a job's bounds are the connection's own; a sweep's or a claim's are
        # set at the start of its transaction (app/db/session_kinds.py).
        connect_args={"server_settings": session_kinds.server_settings(settings)},
    )

    def on_begin(conn: Any) -> None:
        statement = session_kinds.transaction_settings(settings, session_kinds.current_kind())
        if statement is not None and not conn._is_autocommit_isolation():
            conn.exec_driver_sql(statement)

    event.listen(engine.sync_engine, "begin", on_begin)
    # Not pool_pre_ping: three round trips before every transaction (see app/db/liveness.py).
    check_when_idle(engine)
    return engine, engine
