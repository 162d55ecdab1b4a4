"""What the tests of connection upkeep share: a clock they move by hand, and a connection of the
server's own that ends another session as a server restart would."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


class Monotonic:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def monotonic() -> Monotonic:
    return Monotonic()


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(database_url, isolation_level="AUTOCOMMIT")
    yield engine
    await engine.dispose()


async def terminate(admin: AsyncEngine, pid: int) -> None:
    """End the server session ``pid``, as a restart of the server ends it."""
    async with admin.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
