"""Forgetting audit entries older than ``AUDIT_RETENTION_DAYS``, hourly, a chunk per
transaction, each transaction unlocking the append-only table for its own delete only."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from app.db.dialect import row_count
from app.db.session import Database
from app.platform.audit.append_only import unlocked
from app.platform.audit.models import AuditEntry

CHUNK_ROWS = 1000


async def purge_audit(db: Database, before: datetime, *, chunk_rows: int = CHUNK_ROWS) -> int:
    """Remove entries recorded before ``before``; returns how many went."""
    chosen = select(AuditEntry.id).where(AuditEntry.at < before).limit(chunk_rows)
    statement = delete(AuditEntry).where(AuditEntry.id.in_(chosen))
    total = 0
    while True:
        async with db.write() as uow, unlocked(uow.session):
            gone = row_count(await uow.session.execute(statement))
        total += gone
        if gone < chunk_rows:
            return total
        await asyncio.sleep(0)  # let other writers in between chunks


def retention_cutoff(tick: datetime, days: int) -> datetime:
    return tick - timedelta(days=days)
