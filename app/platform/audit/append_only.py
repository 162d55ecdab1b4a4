"""The audit log is append-only, enforced by the database.

On PostgreSQL a row trigger refuses ``UPDATE`` and ``DELETE`` (and a statement trigger
``TRUNCATE``) unless the transaction has set ``sweepline.audit_retention`` to ``on``; on SQLite,
which has no session settings, triggers ``RAISE(ABORT)`` unless ``audit_log_unlock`` holds a row.
:func:`unlocked` sets either switch for the rest of one write transaction and clears it at the
end of the block: the retention sweep, erasure's redaction and the tests' cleanup use it, and
nothing else. The triggers are made by migration ``0490_platform_audit_log``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text

from app.db.dialect import is_postgres
from app.db.session import WriteSession

SETTING = "sweepline.audit_retention"


async def unlock(session: WriteSession) -> None:
    """Allow this transaction to change or remove audit rows until :func:`relock` (or, on
    PostgreSQL, the transaction's end)."""
    if is_postgres(session):
        await session.execute(text(f"SELECT set_config('{SETTING}', 'on', true)"))
    else:
        await session.execute(text("INSERT OR IGNORE INTO audit_log_unlock (id) VALUES (1)"))


async def relock(session: WriteSession) -> None:
    if is_postgres(session):
        await session.execute(text(f"SELECT set_config('{SETTING}', 'off', true)"))
    else:
        await session.execute(text("DELETE FROM audit_log_unlock"))


@asynccontextmanager
async def unlocked(session: WriteSession) -> AsyncIterator[None]:
    """Audit rows may be changed or removed inside the block, in this transaction only."""
    await unlock(session)
    try:
        yield
    finally:
        await relock(session)
