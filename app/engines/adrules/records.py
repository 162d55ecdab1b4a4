"""Writing and reading the evidence of runs (spec AR-18, AR-22, AR-25).

The worker writes one execution record per campaign × task × run and closes the dispatch's batch
record with its counts and status. The rule log reads batches newest first and a batch's records.
Cooldowns read the latest executed record of each task and campaign.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update

from app.db import keyset
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_exists, scoped_select
from app.engines.adrules.batch_states import BATCHES
from app.engines.adrules.models import (
    BATCH_COMPLETED,
    BATCH_FAILED,
    BATCH_QUEUED,
    BATCH_RUNNING,
    AdAccount,
    Batch,
    Rule,
    Task,
)
from app.engines.adrules.run_models import (
    RECORD_ERROR,
    RECORD_EXECUTED,
    RECORD_NOT_EXECUTED,
    RECORD_SKIPPED,
    RECORD_WOULD_EXECUTE,
    ExecutionRecord,
)
from app.engines.adrules.work.cooldown import LastExecution
from app.errors import NotFound

CHUNK = 500
"""Ids per ``IN (…)`` list (SQLite allows a few thousand parameters per statement)."""


def _chunks(items: Sequence[str], size: int = CHUNK) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


async def last_executions(
    session: ReadSession,
    task_ids: Sequence[int],
    campaign_ids: Sequence[str],
    *,
    shadow: bool = False,
) -> dict[tuple[int, str], LastExecution]:
    """The latest executed record of each (task, campaign) pair, for the cooldown check. A shadow
    run's cooldowns count what it would have done (``would_execute``), so its log shows the
    cadence the rule would have live; a real execution never waits on a shadow one."""
    status = RECORD_WOULD_EXECUTE if shadow else RECORD_EXECUTED
    out: dict[tuple[int, str], LastExecution] = {}
    if not task_ids or not campaign_ids:
        return out
    for chunk in _chunks(list(campaign_ids)):
        latest = (
            select(func.max(ExecutionRecord.id).label("id"))
            .where(
                ExecutionRecord.status == status,
                ExecutionRecord.task_id.in_(task_ids),
                ExecutionRecord.campaign_id.in_(chunk),
            )
            .group_by(ExecutionRecord.task_id, ExecutionRecord.campaign_id)
            .subquery()
        )
        rows = await session.execute(
            select(
                ExecutionRecord.task_id,
                ExecutionRecord.campaign_id,
                ExecutionRecord.created_at,
                ExecutionRecord.next_permitted_at,
            ).join(latest, latest.c.id == ExecutionRecord.id)
        )
        for task_id, campaign_id, created_at, next_at in rows.all():
            out[(task_id, campaign_id)] = LastExecution(created_at, next_at)
    return out


async def recorded_pairs(
    session: ReadSession, batch_id: str, ad_account_id: int
) -> set[tuple[int, str]]:
    """(task, campaign) pairs already recorded for this batch and account: a retried job skips
    them instead of acting twice."""
    rows = await session.execute(
        select(ExecutionRecord.task_id, ExecutionRecord.campaign_id).where(
            ExecutionRecord.batch_id == batch_id,
            ExecutionRecord.ad_account_id == ad_account_id,
        )
    )
    return {(t, c) for t, c in rows.all()}


async def insert_records(session: WriteSession, rows: list[dict[str, Any]]) -> None:
    if rows:
        await session.execute(insert(ExecutionRecord), rows)


async def start_batch(
    session: WriteSession, batch_record_id: int, now: datetime, timezone: str | None = None
) -> None:
    """Mark the batch running; ``timezone`` is the zone the run evaluates in (spec AR-44)."""
    values: dict[str, Any] = {"started_at": func.coalesce(Batch.started_at, now)}
    if timezone is not None:
        values["timezone"] = timezone
    # Only a queued batch starts: a job run again on a batch already running (its worker died)
    # finds it as the first run left it.
    started = BATCHES.transition(update(Batch).where(Batch.id == batch_record_id), BATCH_RUNNING)
    await session.execute(started.values(**values))


@dataclass(frozen=True, slots=True)
class Counts:
    executed: int = 0
    not_executed: int = 0
    skipped: int = 0
    errors: int = 0

    @property
    def total(self) -> int:
        return self.executed + self.not_executed + self.skipped + self.errors


async def batch_counts(session: ReadSession, batch_id: str, ad_account_id: int) -> Counts:
    rows = await session.execute(
        select(ExecutionRecord.status, func.count())
        .where(ExecutionRecord.batch_id == batch_id, ExecutionRecord.ad_account_id == ad_account_id)
        .group_by(ExecutionRecord.status)
    )
    by_status = {status: count for status, count in rows.all()}
    return Counts(
        # A shadow batch (``Batch.shadow``) counts what it would have executed here.
        executed=by_status.get(RECORD_EXECUTED, 0) + by_status.get(RECORD_WOULD_EXECUTE, 0),
        not_executed=by_status.get(RECORD_NOT_EXECUTED, 0),
        skipped=by_status.get(RECORD_SKIPPED, 0),
        errors=by_status.get(RECORD_ERROR, 0),
    )


async def finish_batch(
    session: WriteSession,
    batch_record_id: int,
    counts: Counts,
    now: datetime,
    *,
    error: str | None = None,
) -> str:
    """Close the batch record: counts from the records, ``failed`` when nothing but errors came
    out of a non-empty run (or the run itself broke), ``completed`` otherwise."""
    failed = error is not None or (counts.total > 0 and counts.errors == counts.total)
    status = BATCH_FAILED if failed else BATCH_COMPLETED
    await session.execute(
        BATCHES.transition(update(Batch).where(Batch.id == batch_record_id), status).values(
            executed=counts.executed,
            not_executed=counts.not_executed,
            skipped=counts.skipped,
            errors=counts.errors,
            error=error,
            finished_at=now,
        )
    )
    return status


async def defer_batch(
    session: WriteSession, batch_record_id: int, resumes_at: datetime, reason: str
) -> None:
    """The run was put back on the queue (Meta throttled the account): the batch waits again."""
    await session.execute(
        BATCHES.transition(
            update(Batch).where(Batch.id == batch_record_id), BATCH_QUEUED, from_=(BATCH_RUNNING,)
        ).values(
            error=f"resumes at {resumes_at:%Y-%m-%d %H:%M:%S} UTC: {reason}"[:2000],
        )
    )


# -- the rule log ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchSummary:
    batch: Batch
    rule_name: str
    account_name: str


async def list_batches(
    session: ReadSession,
    workspace_id: int,
    *,
    rule_id: int | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[BatchSummary]:
    """Batches newest first (``limit + 1`` rows so the caller can tell there is more)."""
    stmt = (
        scoped_select(Batch, workspace_id, Batch, Rule.name, AdAccount.name)
        .join(Rule, Rule.id == Batch.rule_id)
        .join(AdAccount, AdAccount.id == Batch.ad_account_id)
        .order_by(Batch.created_at.desc(), Batch.id.desc())
        .limit(limit + 1)
    )
    if rule_id is not None:
        stmt = stmt.where(Batch.rule_id == rule_id)
    if before_id is not None:
        # Newest first by creation time, then id; the cursor is the last row's id.
        cursor = await session.get(Batch, before_id)
        if cursor is not None:
            stmt = stmt.where(
                (Batch.created_at < cursor.created_at)
                | ((Batch.created_at == cursor.created_at) & (Batch.id < cursor.id))
            )
    rows = await session.execute(stmt)
    return [BatchSummary(b, rule, account) for b, rule, account in rows.all()]


async def has_batch(session: ReadSession, workspace_id: int) -> bool:
    """Whether a rule of the workspace has run at least once (a batch was recorded)."""
    return bool(await session.scalar(select(scoped_exists(Batch, workspace_id))))


async def batch_outcomes_since(
    session: ReadSession, workspace_id: int, since: datetime, *, limit: int
) -> list[tuple[datetime, int, int, int]]:
    """The workspace's batches created since ``since`` (at most ``limit``): when each was
    created, and its objects executed, skipped and in error."""
    rows = await session.execute(
        scoped_select(
            Batch, workspace_id, Batch.created_at, Batch.executed, Batch.skipped, Batch.errors
        )
        .where(Batch.created_at >= since)
        .limit(limit)
    )
    return [(at, executed, skipped, errors) for at, executed, skipped, errors in rows]


async def get_batch(session: ReadSession, workspace_id: int, batch_record_id: int) -> BatchSummary:
    row = (
        await session.execute(
            scoped_select(Batch, workspace_id, Batch, Rule.name, AdAccount.name)
            .join(Rule, Rule.id == Batch.rule_id)
            .join(AdAccount, AdAccount.id == Batch.ad_account_id)
            .where(Batch.id == batch_record_id)
        )
    ).first()
    if row is None:
        raise NotFound("batch not found")
    return BatchSummary(*row)


async def batch_records(session: ReadSession, batch: Batch) -> list[ExecutionRecord]:
    """The records of one batch and account, by task then campaign."""
    rows = await session.scalars(
        scoped_select(ExecutionRecord, batch.workspace_id)
        .where(
            ExecutionRecord.batch_id == batch.batch_id,
            ExecutionRecord.ad_account_id == batch.ad_account_id,
        )
        .order_by(ExecutionRecord.task_id, ExecutionRecord.campaign_id, ExecutionRecord.id)
    )
    return list(rows.all())


async def records_page(
    session: ReadSession,
    batch: Batch,
    *,
    status: str | None = None,
    after_id: int | None = None,
    limit: int = 100,
) -> list[ExecutionRecord]:
    """One page of a batch's records in the order they were written (``limit + 1`` rows)."""
    stmt = scoped_select(ExecutionRecord, batch.workspace_id).where(
        ExecutionRecord.batch_id == batch.batch_id,
        ExecutionRecord.ad_account_id == batch.ad_account_id,
    )
    if status is not None:
        stmt = stmt.where(ExecutionRecord.status == status)
    if after_id is not None:
        stmt = stmt.where(keyset.after(ExecutionRecord.id, after_id))
    rows = await session.scalars(stmt.order_by(ExecutionRecord.id).limit(limit + 1))
    return list(rows.all())


async def task_names(session: ReadSession, task_ids: Iterable[int]) -> dict[int, str]:
    """Names of tasks, archived ones included (old records keep pointing at them)."""
    ids = sorted(set(task_ids))
    if not ids:
        return {}
    rows = await session.execute(select(Task.id, Task.name, Task.position).where(Task.id.in_(ids)))
    return {task_id: name or f"Task {position + 1}" for task_id, name, position in rows.all()}
