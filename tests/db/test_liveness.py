"""A pooled PostgreSQL connection is checked before use only when it sat idle (app/db/liveness.py):
one closed by the server while idle is replaced before the transaction begins; one given back a
moment ago goes out unchecked, and if the server closed it meanwhile its transaction fails and the
next one gets a new connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import exc, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db import liveness
from app.db.session import Database
from app.settings import Settings
from tests.db.conftest import Monotonic, terminate

pytestmark = pytest.mark.postgres


@pytest.fixture
async def engine(database_url: str, monotonic: Monotonic) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(database_url, pool_size=1, max_overflow=0)
    liveness.check_when_idle(engine, idle_seconds=5, monotonic=monotonic)
    yield engine
    await engine.dispose()


async def backend_pid(engine: AsyncEngine) -> int:
    async with engine.begin() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_a_connection_closed_while_idle_is_replaced_before_the_transaction(
    engine: AsyncEngine, admin: AsyncEngine, monotonic: Monotonic
) -> None:
    first = await backend_pid(engine)
    await terminate(admin, first)
    monotonic.now += 5  # idle for the whole bound: checked at checkout

    second = await backend_pid(engine)

    assert second != first


async def test_a_connection_given_back_a_moment_ago_goes_out_unchecked(
    engine: AsyncEngine, admin: AsyncEngine, monotonic: Monotonic
) -> None:
    first = await backend_pid(engine)
    await terminate(admin, first)
    monotonic.now += 4.9  # within the bound: no check, so the closed connection is used

    with pytest.raises(exc.DBAPIError) as failed:
        await backend_pid(engine)

    assert failed.value.connection_invalidated
    assert await backend_pid(engine) != first  # the pool replaced it


async def test_the_service_engine_checks_idle_connections(
    settings: Settings, admin: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(liveness, "IDLE_SECONDS", 0.0)  # every connection counts as idle
    db = Database(settings.database)
    try:
        first = await backend_pid(db.write_engine)
        await terminate(admin, first)
        assert await backend_pid(db.write_engine) != first
    finally:
        await db.dispose()
