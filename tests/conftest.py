"""Shared fixtures. The database comes from ``TEST_DATABASE_URL`` (default: a fresh SQLite file);
the queue is arq when ``TEST_REDIS_URL`` is set. The schema is built by running the migrations.
Each test starts from empty tables.

``REQUIRE_SERVICES=1`` (set by CI) turns an unreachable PostgreSQL or Redis into a failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from argon2 import PasswordHasher
from cryptography.fernet import Fernet
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import ManualClock
from app.db.migrate import upgrade
from app.db.session import Database
from app.models import metadata
from app.platform.audit.append_only import relock, unlock
from app.platform.tokens import use_password_hasher
from app.runtime import Runtime
from app.scheduling.queue import DatabaseQueue
from app.settings import Settings, load_settings
from app.wiring import assemble
from tests.factories import Tenant, create_tenant
from tests.spans import spans  # noqa: F401 - fixture: an in-memory span exporter, for one test

# Cheap argon2 parameters for the accounts tests create (still argon2id; production uses defaults).
use_password_hasher(PasswordHasher(time_cost=2, memory_cost=4096, parallelism=1))

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL", "")
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "")
REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def is_postgres() -> bool:
    return TEST_DATABASE_URL.startswith("postgresql")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_pg = pytest.mark.skip(reason="needs TEST_DATABASE_URL=postgresql+asyncpg://…")
    skip_redis = pytest.mark.skip(reason="needs TEST_REDIS_URL")
    for item in items:
        if "postgres" in item.keywords and not is_postgres():
            item.add_marker(skip_pg)
        if "redis" in item.keywords and not TEST_REDIS_URL:
            item.add_marker(skip_redis)


async def _create_pg_database(base_url: str) -> str:
    url = make_url(base_url)
    name = f"sweepline_test_{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OSError as exc:
        if REQUIRE_SERVICES:
            pytest.fail(f"PostgreSQL is required but unreachable: {exc}")
        raise
    finally:
        await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


async def _drop_pg_database(db_url: str) -> None:
    url = make_url(db_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    await admin.dispose()


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sweepline")


@pytest.fixture(scope="session")
async def database_url(tmp_root: Path) -> AsyncIterator[str]:
    """A fresh database for the session, migrated from empty."""
    if is_postgres():
        url = await _create_pg_database(TEST_DATABASE_URL)
        await upgrade(url)
        yield url
        await _drop_pg_database(url)
    else:
        url = f"sqlite+aiosqlite:///{tmp_root / 'test.db'}"
        await upgrade(url)
        yield url


@pytest.fixture(scope="session")
async def redis_url() -> AsyncIterator[str]:
    if not TEST_REDIS_URL:
        yield ""
        return
    from redis.asyncio import Redis

    client = Redis.from_url(TEST_REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:
        if REQUIRE_SERVICES:
            pytest.fail(f"Redis is required but unreachable: {exc}")
        raise
    finally:
        await client.aclose()
    yield TEST_REDIS_URL


@pytest.fixture(scope="session")
def settings(database_url: str, redis_url: str, tmp_root: Path) -> Settings:
    env = {
        "DATABASE_URL": database_url,
        "ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SESSION_SECRET": "test-session-secret-" + uuid.uuid4().hex,
        "KEY_FILE": str(tmp_root / "keys.json"),
        "JOB_POLL_INTERVAL": "0.05",
        "SHUTDOWN_GRACE_SECONDS": "5",
        "SMTP_PORT": "1",
        # The loopback simulators are the outside APIs here; tests of the refusals use a guard
        # of their own that allows nothing private.
        "OUTBOUND_ALLOW_PRIVATE": "true",
        "METRICS_TOKEN": METRICS_TOKEN,
        # Most tests run on a manual clock that never refills a bucket: with the default limits a
        # test that pages through a long table would hear 429 in place of what it checks. The
        # limits have tests of their own, which set them explicitly.
        "RATE_LIMIT_KEY_READ_BURST": "0",
        "RATE_LIMIT_KEY_WRITE_BURST": "0",
        "RATE_LIMIT_WORKSPACE_READ_BURST": "0",
        "RATE_LIMIT_WORKSPACE_WRITE_BURST": "0",
    }
    if redis_url:
        env["REDIS_URL"] = redis_url
        env["ARQ_QUEUE_NAME"] = f"sweepline-test-{uuid.uuid4().hex[:8]}"
    return load_settings(env)


@pytest.fixture(scope="session")
async def shared_db(settings: Settings) -> AsyncIterator[Database]:
    db = Database(settings.database)
    yield db
    await db.dispose()


async def truncate_all(db: Database) -> None:
    tables = [t.name for t in metadata.sorted_tables]
    async with db.write() as uow:
        # The audit log is append-only unless the transaction unlocks it (its own switch table
        # is emptied last, by relock).
        await unlock(uow.session)
        await uow.session.execute(text("DELETE FROM audit_log"))
        # DELETE, children first: on tables this small it is ~20x faster than TRUNCATE, which
        # rewrites every table's files on PostgreSQL.
        for table in reversed(tables):
            if table not in ("audit_log", "audit_log_unlock"):
                await uow.session.execute(text(f'DELETE FROM "{table}"'))
        await relock(uow.session)


def with_own_queue(settings: Settings) -> Settings:
    """``settings`` with an arq queue name of its own: the tests share one event loop, so a
    worker an earlier test left behind must not take this test's jobs from a shared queue."""
    if not settings.queue.uses_redis:
        return settings
    queue = dataclasses.replace(
        settings.queue, arq_queue_name=f"sweepline-test-{uuid.uuid4().hex[:8]}"
    )
    return dataclasses.replace(settings, queue=queue)


@pytest.fixture
async def database_queue(runtime: Runtime) -> AsyncIterator[DatabaseQueue]:
    """A database queue on the test's database and clock, whatever backend the runtime uses
    (for tests of leases). Closed after the test: on PostgreSQL it keeps connections of its own
    between leases (app/db/kept_connections.py), which would otherwise be left to the
    garbage collector."""
    queue = DatabaseQueue(runtime.db, runtime.clock)
    try:
        yield queue
    finally:
        await queue.aclose()


@pytest.fixture
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for one test. Tests that parse the source tree with
    ``ast`` use it: on Python 3.11 before 3.11.9 a collection that runs finalizers in the middle
    of ``ast.parse`` (an earlier test's unreturned pooled connection is enough) makes the parse
    fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def runtime(
    settings: Settings, shared_db: Database, clock: ManualClock
) -> AsyncIterator[Runtime]:
    """A runtime on a :class:`ManualClock`, every engine registered, tables emptied afterwards."""
    rt = assemble(with_own_queue(settings), clock, db=shared_db)
    try:
        yield rt
    finally:
        await rt.stop()
        await rt.resources.aclose()
        await rt.queue.aclose()
        await truncate_all(shared_db)
        if settings.queue.uses_redis:
            from redis.asyncio import Redis

            client = Redis.from_url(settings.queue.redis_url)
            keys = await client.keys(f"{rt.settings.queue.arq_queue_name}*")
            if keys:
                await client.delete(*keys)
            await client.aclose()


@pytest.fixture
async def real_time_runtime(settings: Settings, shared_db: Database) -> AsyncIterator[Runtime]:
    """Like ``runtime`` but on the system clock (for workers and sweepers that really wait)."""
    from app.clock import SystemClock

    rt = assemble(with_own_queue(settings), SystemClock(), db=shared_db)
    try:
        yield rt
    finally:
        await rt.stop()
        await rt.resources.aclose()
        await rt.queue.aclose()
        await truncate_all(shared_db)


@pytest.fixture
async def tenant(runtime: Runtime) -> Tenant:
    return await create_tenant(runtime, name="Acme")


@pytest.fixture
async def other_tenant(runtime: Runtime) -> Tenant:
    return await create_tenant(runtime, name="Globex")


_SHARED_APPS: dict[tuple[int, bool], tuple[Settings, Any]] = {}


def shared_app(settings: Settings, runtime: Runtime) -> Any:
    """The application for ``settings``, built once per test process and pointed at this test's
    runtime. Building one registers some 700 route handlers (0.5–1 s of CPU), which every test
    using ``client`` would otherwise pay. Only the runtime differs between tests here: the app
    reads it from its state on every request, and ``httpx.ASGITransport`` never runs the
    lifespan that would start the first test's runtime. An app for other settings, or with
    request tracing switched on, is built on its own."""
    from app import telemetry
    from app.web.app import create_app

    key = (id(settings), telemetry.enabled())
    cached = _SHARED_APPS.get(key)
    if cached is None or cached[0] is not settings:
        cached = (settings, create_app(settings, runtime, background=False))
        _SHARED_APPS[key] = cached
    app = cached[1]
    app.state.runtime = runtime
    return app


@pytest.fixture
async def client(settings: Settings, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the app (no background workers: tests drive them explicitly)."""
    transport = httpx.ASGITransport(app=shared_app(settings, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


METRICS_TOKEN = "test-metrics-token"


def metrics_auth() -> dict[str, str]:
    """Headers of a Prometheus scrape holding the tests' ``METRICS_TOKEN`` (PL-14)."""
    return {"Authorization": f"Bearer {METRICS_TOKEN}"}


class HoldsApiKey(Protocol):
    """A tenant of the tests' factories, whichever: each holds its workspace's API key."""

    @property
    def api_key(self) -> str: ...


def auth(tenant: HoldsApiKey) -> dict[str, str]:
    """Headers authenticating as ``tenant``'s API key."""
    return {"Authorization": f"Bearer {tenant.api_key}"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def with_settings(settings: Settings, **groups: object) -> Settings:
    """A copy of ``settings`` with whole groups replaced (e.g. ``sweepers=...``)."""
    return dataclasses.replace(settings, **groups)  # type: ignore[arg-type]


async def eventually(predicate, timeout: float = 10.0, interval: float = 0.02) -> None:
    """Wait (in real time) until ``await predicate()`` is true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await predicate():
            return
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)
