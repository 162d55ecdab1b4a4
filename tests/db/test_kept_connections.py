"""One-statement writes on PostgreSQL run on connections kept for them (app/db/kept_connections.py):
one connection serves write after write; one the server closed while it sat idle is checked and
replaced before the statement, with the pool's bound (app/db/liveness.py); one found closed by its
statement is discarded, never handed to the pool's next transaction; and disposing the database
closes them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.column_arrays import ColumnArrays
from app.db.kept_connections import KeptConnections
from app.db.lone_statement import write_alone
from app.db.session import Database
from app.settings import DatabaseSettings
from tests.db.conftest import Monotonic, terminate

pytestmark = pytest.mark.postgres


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    db = Database(DatabaseSettings(url=database_url, pool_size=1))
    yield db
    await db.dispose()


async def alive(admin: AsyncEngine, pid: int) -> bool:
    async with admin.connect() as conn:
        found = await conn.execute(
            text("SELECT 1 FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        )
        return found.first() is not None


async def lone_pid(db: Database) -> int:
    rows = await write_alone(db, lambda: ColumnArrays("SELECT pg_backend_pid()", ()))
    assert rows is not None
    return int(rows[0][0])


async def kept_pid(kept: KeptConnections) -> int:
    async with kept.driver() as driver:
        return int(await driver.fetchval("SELECT pg_backend_pid()"))


async def pool_pid(db: Database) -> int:
    async with db.write() as uow:
        return int((await uow.session.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_one_connection_serves_write_after_write_outside_the_pool(db: Database) -> None:
    first = await lone_pid(db)

    assert await lone_pid(db) == first
    assert await lone_pid(db) == first
    assert await pool_pid(db) != first  # still checked out: the pool's transactions use another


@pytest.fixture
async def kept(db: Database, monotonic: Monotonic) -> AsyncIterator[KeptConnections]:
    """One connection kept, checked when idle 5 s or longer on the test's clock."""
    kept = KeptConnections(db, keep=1, idle_seconds=5, monotonic=monotonic)
    yield kept
    await kept.aclose()


async def test_a_connection_closed_while_idle_is_replaced_before_the_statement(
    kept: KeptConnections, admin: AsyncEngine, monotonic: Monotonic
) -> None:
    first = await kept_pid(kept)
    await terminate(admin, first)
    monotonic.now += 5  # idle for the whole bound: checked before use

    assert await kept_pid(kept) != first


async def test_a_connection_found_closed_by_its_statement_is_discarded_not_pooled(
    kept: KeptConnections, db: Database, admin: AsyncEngine, monotonic: Monotonic
) -> None:
    first = await kept_pid(kept)
    await terminate(admin, first)
    monotonic.now += 4.9  # used a moment ago: not checked, so the statement meets the closure

    # asyncpg's error depends on when it reads the server's goodbye (closed, or mid-protocol).
    with pytest.raises(
        (asyncpg.InterfaceError, asyncpg.InternalClientError, asyncpg.PostgresError)
    ):
        await kept_pid(kept)

    # The pool (one connection) is whole: its next transactions do not get the dead one.
    assert await pool_pid(db) != first
    assert await pool_pid(db) != first
    assert await kept_pid(kept) != first


async def test_disposing_the_database_closes_its_kept_connections(
    database_url: str, admin: AsyncEngine
) -> None:
    db = Database(DatabaseSettings(url=database_url, pool_size=1))
    pid = await lone_pid(db)
    assert await alive(admin, pid)

    await db.dispose()

    for _ in range(100):  # the server ends the backend just after the client's goodbye
        if not await alive(admin, pid):
            break
        await asyncio.sleep(0.02)
    assert not await alive(admin, pid)
