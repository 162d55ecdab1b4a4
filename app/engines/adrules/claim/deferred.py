"""The accounts earlier ticks deferred (their budget ran out first), oldest first, grouped by the
batch they belong to: the next tick submits them before any newly due rule's accounts, so an
account is never starved by others hanging every tick."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from app.db.session import Database
from app.engines.adrules.models import BATCH_DEFERRED, Batch


@dataclass(slots=True)
class DeferredBatch:
    rule_id: int
    workspace_id: int
    batch_id: str
    tick_at: datetime
    records: list[tuple[int, int]] = field(default_factory=list)
    """(batch record id, ad account id), in the order they were deferred."""
    waited: dict[int, float] = field(default_factory=dict)
    """Seconds of its deadline each record's account already used, by record id."""


async def deferred_batches(db: Database, limit: int) -> list[DeferredBatch]:
    """Up to ``limit`` deferred records, oldest tick first, grouped by batch."""
    async with db.read() as session:
        rows = (
            await session.execute(
                select(
                    Batch.id,
                    Batch.ad_account_id,
                    Batch.rule_id,
                    Batch.workspace_id,
                    Batch.batch_id,
                    Batch.tick_at,
                    Batch.fetch_waited_ms,
                )
                .where(Batch.status == BATCH_DEFERRED)
                .order_by(Batch.tick_at, Batch.id)
                .limit(limit)
            )
        ).all()
    groups: dict[str, DeferredBatch] = {}
    for record_id, account_id, rule_id, workspace_id, batch_id, tick_at, waited_ms in rows:
        group = groups.setdefault(batch_id, DeferredBatch(rule_id, workspace_id, batch_id, tick_at))
        group.records.append((record_id, account_id))
        group.waited[record_id] = waited_ms / 1000
    return list(groups.values())
