"""Each kind of session gets its own lock bounds (app/db/session_kinds.py; PL-15's database
settings): on PostgreSQL a request and a job run with the connection's ``lock_timeout`` and
``idle_in_transaction_session_timeout``, a sweep tick and a claim with the claim's shorter
``lock_timeout`` for their transaction only; on SQLite a sweep's or a claim's write waits the
claim's busy timeout, and a request's write the ordinary one again afterwards."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.db.session_kinds import CLAIM, JOB, REQUEST, SWEEP, SessionKind, session_kind
from app.runtime import Runtime
from tests.conftest import is_postgres


async def _pg_bounds(runtime: Runtime, kind: SessionKind) -> tuple[str, str]:
    with session_kind(kind):
        async with runtime.db.write() as uow:
            lock = await uow.session.scalar(text("SHOW lock_timeout"))
            idle = await uow.session.scalar(text("SHOW idle_in_transaction_session_timeout"))
    return str(lock), str(idle)


async def _sqlite_busy(runtime: Runtime, kind: SessionKind) -> int:
    with session_kind(kind):
        async with runtime.db.write() as uow:
            return int(await uow.session.scalar(text("PRAGMA busy_timeout")) or 0)


@pytest.mark.postgres
async def test_postgres_lock_bounds_by_session_kind(runtime: Runtime) -> None:
    settings = runtime.settings.database
    ordinary = (f"{settings.lock_timeout_ms // 1000}s", "1min")
    claim = (f"{settings.claim_lock_timeout_ms // 1000}s", "1min")
    assert await _pg_bounds(runtime, REQUEST) == ordinary
    assert await _pg_bounds(runtime, JOB) == ordinary
    assert await _pg_bounds(runtime, SWEEP) == claim
    assert await _pg_bounds(runtime, CLAIM) == claim
    # SET LOCAL: the claim's bound ended with its transaction, the connection keeps its own.
    assert await _pg_bounds(runtime, REQUEST) == ordinary


@pytest.mark.skipif(is_postgres(), reason="SQLite's busy timeout")
async def test_sqlite_busy_timeout_by_session_kind(runtime: Runtime) -> None:
    settings = runtime.settings.database
    assert await _sqlite_busy(runtime, REQUEST) == settings.busy_timeout_ms
    assert await _sqlite_busy(runtime, SWEEP) == settings.claim_busy_timeout_ms
    assert await _sqlite_busy(runtime, CLAIM) == settings.claim_busy_timeout_ms
    assert await _sqlite_busy(runtime, JOB) == settings.busy_timeout_ms
