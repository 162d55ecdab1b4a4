"""A lock timeout is the database being busy, not the request being wrong: 503 with
``Retry-After`` in the API's error format (and a page for a browser), never a 500; the request
changed nothing, so repeating it succeeds."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.clock import ManualClock
from app.db.session import Database
from app.runtime import Runtime
from app.settings import Settings
from app.wiring import assemble
from tests.conftest import auth, is_postgres
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport

pytestmark = pytest.mark.skipif(is_postgres(), reason="the SQLite write lock")


@pytest.fixture
async def impatient(
    settings: Settings, runtime: Runtime, clock: ManualClock
) -> AsyncIterator[httpx.AsyncClient]:
    """The app on a database handle that waits only 50 ms for the write lock."""
    from app.web.app import create_app

    quick = dataclasses.replace(
        settings, database=dataclasses.replace(settings.database, busy_timeout_ms=50)
    )
    db = Database(quick.database)
    rt = assemble(quick, clock, db=db)
    app = create_app(quick, rt, background=False)
    try:
        async with httpx.AsyncClient(
            transport=asgi_transport(app), base_url="http://testserver"
        ) as c:
            yield c
    finally:
        await rt.queue.aclose()
        await db.dispose()


async def test_a_locked_database_answers_503_with_retry_after(
    impatient: httpx.AsyncClient, settings: Settings, tenant: Tenant
) -> None:
    path = make_url(settings.database.url).database
    assert path
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        busy = await impatient.post(
            "/api/v1/funnels/contacts", json={"email": "a@x.test"}, headers=auth(tenant)
        )
        assert busy.status_code == 503, busy.text
        assert busy.headers["retry-after"] == "2"
        body = busy.json()
        assert body["code"] == "database_busy"
        assert "nothing was changed" in body["message"]
        assert body["details"] == []
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    again = await impatient.post(
        "/api/v1/funnels/contacts", json={"email": "a@x.test"}, headers=auth(tenant)
    )
    assert again.status_code == 201, again.text
