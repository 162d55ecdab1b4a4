"""Bulk jobs: work too large for one transaction (CSV imports, bulk enrolment, large deletes), done
by a background job in bounded chunks.

Each chunk is its own short transaction: the kind's ``step`` applies up to ``BULK_CHUNK_ITEMS``
items and the same transaction records the new cursor, the counters and the refused items. A
crash (or a lost lease) therefore resumes exactly after the last committed chunk; an item is
either applied with its chunk or not at all. Between chunks the runner steps back from the
database for as long as the chunk held it (on SQLite, where there is one write lock), so the API
and the sweeps keep writing while an import runs. A chunk that meets a lock timeout is simply
tried again.

An engine declares a :class:`BulkKind` (name + step), turns it into a job with
:func:`bulk_job_spec` (registered like any other job) and starts work with :func:`submit`. The
status, progress and report are read with :func:`get_bulk_job` / :func:`errors_of`, scoped by
workspace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update

from app.db import keyset
from app.db.locks import is_lock_timeout
from app.errors import NotFound
from app.scheduling.bulk_models import (
    BULK_CANCELLED,
    BULK_DONE,
    BULK_FAILED,
    BULK_FINAL,
    BULK_JOBS,
    BULK_QUEUED,
    BULK_RUNNING,
    BulkJob,
    BulkJobError,
)
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy

if TYPE_CHECKING:
    from app.db.session import ReadSession, UnitOfWork, WriteSession
    from app.scheduling.queue import JobQueue

log = logging.getLogger(__name__)

SLICE_SECONDS = 20.0
"""One job attempt runs chunks for about this long, then queues its own continuation: a long
import never looks like a stuck job to the queue, and other jobs get worker slots in between."""
MIN_PAUSE_SECONDS = 0.005
MIN_CHUNK_ITEMS = 10
LOCK_RETRY_SECONDS = 0.2
MAX_LOCK_RETRIES = 50
MAX_MESSAGE_CHARS = 1000


class BulkJobNotFound(NotFound):
    code = "job_not_found"


@dataclass(frozen=True, slots=True)
class ItemError:
    """One refused item: ``item`` is what a person finds it by (a CSV row number)."""

    item: int
    field: str
    message: str


@dataclass(slots=True)
class Chunk:
    """What one step did: the cursor the next step starts from, how many items it consumed,
    counter increments and refused items. ``finished`` ends the job."""

    cursor: dict[str, Any]
    processed: int
    finished: bool
    counters: dict[str, int] = field(default_factory=dict)
    errors: list[ItemError] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StepInput:
    """What a step gets besides the session: the job row (inside this chunk's transaction), the
    uploaded source (read once per attempt), the chunk size and the time."""

    job: BulkJob
    source: str
    limit: int
    now: datetime


Step = Callable[["WriteSession", StepInput], Awaitable[Chunk]]


@dataclass(frozen=True, slots=True)
class BulkKind:
    name: str
    """Stable name, stored in ``bulk_jobs.kind`` (e.g. ``funnels.contacts_import``)."""
    step: Step
    title: str = ""
    """What a person calls it ("Contact import")."""


class BulkPayload(JobPayload, frozen=True):
    bulk_job_id: int


def job_name(kind: BulkKind) -> str:
    return f"bulk.{kind.name}"


def bulk_job_spec(kind: BulkKind) -> JobSpec[BulkPayload]:
    """The queue job that runs bulk jobs of ``kind`` (register it with the engine's jobs)."""

    async def handler(ctx: JobContext, payload: BulkPayload) -> None:
        await run_bulk_job(ctx, kind, payload.bulk_job_id, spec)

    spec: JobSpec[BulkPayload] = JobSpec(
        job_name(kind),
        BulkPayload,
        handler,
        max_tries=10,
        timeout_seconds=SLICE_SECONDS * 15,
        backoff_seconds=2.0,
        owner=OwnedBy("bulk_job_id", BulkJob),
    )
    return spec


async def submit(
    uow: UnitOfWork,
    queue: JobQueue,
    spec: JobSpec[BulkPayload],
    *,
    workspace_id: int,
    kind: BulkKind,
    now: datetime,
    params: Mapping[str, Any] | None = None,
    source: str = "",
    total: int | None = None,
) -> BulkJob:
    """Record a bulk job and queue it, in the caller's unit of work (nothing runs unless it
    commits)."""
    job = BulkJob(
        workspace_id=workspace_id,
        kind=kind.name,
        **BULK_JOBS.create(BULK_QUEUED),
        params=dict(params or {}),
        source=source,
        cursor={},
        total=total,
        processed=0,
        counters={},
        error_count=0,
        chunks=0,
        created_at=now,
        updated_at=now,
    )
    uow.session.add(job)
    await uow.session.flush()
    await queue.enqueue(uow, spec, BulkPayload(bulk_job_id=job.id), job_id=_queue_id(job.id, 0))
    return job


def _queue_id(bulk_job_id: int, chunks: int) -> str:
    # Keyed by the chunk it starts from: a continuation queued twice runs once.
    return f"bulk:{bulk_job_id}:{chunks}"


async def run_bulk_job(
    ctx: JobContext, kind: BulkKind, bulk_job_id: int, spec: JobSpec[BulkPayload]
) -> None:
    """Run chunks until the job ends or this attempt's slice is used up (then queue the rest)."""
    source = await _load_source(ctx, bulk_job_id)
    if source is None:
        return
    started = ctx.clock.monotonic()
    lock_retries = 0
    limit = ctx.settings.bulk.chunk_items
    while True:
        try:
            state, held = await _one_chunk(ctx, kind, bulk_job_id, source, limit)
        except Exception as exc:
            if is_lock_timeout(exc) and lock_retries < MAX_LOCK_RETRIES:
                # The chunk rolled back whole; the same chunk runs again once the lock is free.
                lock_retries += 1
                log.info("bulk job %s met a lock; chunk retried", bulk_job_id)
                await asyncio.sleep(LOCK_RETRY_SECONDS)
                continue
            await _record_failure(ctx, bulk_job_id, exc, final=spec.is_last_attempt(ctx.attempt))
            raise
        lock_retries = 0
        if state is None:
            return
        limit = next_chunk_size(
            limit, held, target=ctx.settings.bulk.chunk_seconds, most=ctx.settings.bulk.chunk_items
        )
        await _step_back(ctx, held=held)
        if ctx.clock.monotonic() - started >= SLICE_SECONDS:
            await ctx.queue.enqueue(
                None,
                spec,
                BulkPayload(bulk_job_id=bulk_job_id),
                job_id=_queue_id(bulk_job_id, state),
            )
            return


async def _load_source(ctx: JobContext, bulk_job_id: int) -> str | None:
    async with ctx.db.read() as session:
        row = (
            await session.execute(
                select(BulkJob.status, BulkJob.source).where(BulkJob.id == bulk_job_id)
            )
        ).first()
    if row is None or row[0] in BULK_FINAL:
        return None
    return str(row[1] or "")


def next_chunk_size(current: int, held: float, *, target: float, most: int) -> int:
    """The next chunk's size, so that it takes about ``target`` seconds: proportional to how
    long this one took, never more than double, between ``MIN_CHUNK_ITEMS`` and ``most``."""
    if held <= 0:
        return min(most, current * 2)
    wanted = int(current * min(2.0, target / held))
    return max(min(MIN_CHUNK_ITEMS, most), min(most, wanted))


async def _one_chunk(
    ctx: JobContext, kind: BulkKind, bulk_job_id: int, source: str, limit: int
) -> tuple[int | None, float]:
    """Apply one chunk. Returns the number of chunks done so far (``None`` once the job ended)
    and how long the chunk held the database.

    The time held is counted from the chunk's first statement (on SQLite the write lock is
    taken there) to its commit, not from when it began to wait: the time spent waiting in line
    behind other writers is not the chunk's cost. Counted from the wait, a busy database made
    the chunks smaller and the pauses between them longer, which made the wait longer still
    (a feedback that can shrink an import beside a busy API to a few rows per chunk)."""
    now = ctx.clock.now()
    async with ctx.db.write() as uow:
        session = uow.session
        job = await session.scalar(
            select(BulkJob).where(BulkJob.id == bulk_job_id).with_for_update()
        )
        locked_at = ctx.clock.monotonic()
        if job is None or job.status in BULK_FINAL:
            return None, 0.0
        if job.status == BULK_QUEUED:
            BULK_JOBS.move(job, BULK_RUNNING)
            job.started_at = now
        chunk = await kind.step(session, StepInput(job=job, source=source, limit=limit, now=now))
        await _record_chunk(session, job, chunk, now)
        chunks = None if chunk.finished else job.chunks
    return chunks, ctx.clock.monotonic() - locked_at


async def _record_chunk(session: WriteSession, job: BulkJob, chunk: Chunk, now: datetime) -> None:
    if chunk.errors:
        await session.execute(
            insert(BulkJobError),
            [
                {
                    "bulk_job_id": job.id,
                    "item": e.item,
                    "field": e.field[:200],
                    "message": e.message[:MAX_MESSAGE_CHARS],
                }
                for e in chunk.errors
            ],
        )
    counters = dict(job.counters or {})
    for key, value in chunk.counters.items():
        counters[key] = counters.get(key, 0) + value
    job.counters = counters
    job.cursor = chunk.cursor
    job.processed += chunk.processed
    job.error_count += len(chunk.errors)
    job.chunks += 1
    job.updated_at = now
    if chunk.finished:
        BULK_JOBS.move(job, BULK_DONE)
        job.finished_at = now
        job.source = ""  # the report stays; the upload is not kept once applied
        if job.total is None or job.total < job.processed:
            job.total = job.processed


async def _step_back(ctx: JobContext, *, held: float) -> None:
    """Leave the database to other writers for as long as the chunk held it (SQLite has one
    write lock; its waiting writers poll for it every few milliseconds)."""
    if ctx.db.is_postgres:
        await asyncio.sleep(0)
        return
    await asyncio.sleep(max(MIN_PAUSE_SECONDS, held))


async def _record_failure(
    ctx: JobContext, bulk_job_id: int, exc: BaseException, *, final: bool
) -> None:
    """Keep why the last attempt failed; the last allowed attempt also ends the job (what its
    chunks applied stays applied, as the counters and the report say)."""
    values: dict[str, Any] = {
        "last_error": f"{type(exc).__name__}: {exc}"[:MAX_MESSAGE_CHARS],
        "updated_at": ctx.clock.now(),
    }
    statement = update(BulkJob).where(BulkJob.id == bulk_job_id)
    if final:
        # Every state that is not final reaches failed: the same rows as the guard below.
        statement = BULK_JOBS.transition(statement, BULK_FAILED)
        values |= {"finished_at": ctx.clock.now(), "source": ""}
    else:
        statement = statement.where(BulkJob.status.not_in(BULK_FINAL))
    try:
        async with ctx.db.write() as uow:
            await uow.session.execute(statement.values(**values))
    except Exception:
        log.exception("could not record the failure of bulk job %s", bulk_job_id)


# -- reading and cancelling -----------------------------------------------------------------------


async def get_bulk_job(session: ReadSession, workspace_id: int, bulk_job_id: int) -> BulkJob:
    job = await session.scalar(
        select(BulkJob).where(BulkJob.id == bulk_job_id, BulkJob.workspace_id == workspace_id)
    )
    if job is None:
        raise BulkJobNotFound(f"job {bulk_job_id} not found")
    return job


async def list_bulk_jobs(
    session: ReadSession,
    workspace_id: int,
    *,
    before: int | None,
    limit: int,
    kinds: Sequence[str] | None = None,
) -> list[BulkJob]:
    """Newest first."""
    stmt = select(BulkJob).where(BulkJob.workspace_id == workspace_id)
    if before is not None:
        stmt = stmt.where(keyset.before(BulkJob.id, before))
    if kinds:
        stmt = stmt.where(BulkJob.kind.in_(list(kinds)))
    return list(await session.scalars(stmt.order_by(BulkJob.id.desc()).limit(limit)))


async def errors_of(
    session: ReadSession, bulk_job_id: int, *, after: int | None, limit: int
) -> list[BulkJobError]:
    stmt = select(BulkJobError).where(BulkJobError.bulk_job_id == bulk_job_id)
    if after is not None:
        stmt = stmt.where(keyset.after(BulkJobError.id, after))
    return list(await session.scalars(stmt.order_by(BulkJobError.id).limit(limit)))


async def cancel_bulk_job(
    session: WriteSession, workspace_id: int, bulk_job_id: int, now: datetime
) -> BulkJob:
    """Stop a job after its current chunk; what earlier chunks applied stays applied. Cancelling
    a job that already ended changes nothing."""
    job = await get_bulk_job(session, workspace_id, bulk_job_id)
    if job.status not in BULK_FINAL:
        BULK_JOBS.move(job, BULK_CANCELLED)
        job.finished_at = now
        job.updated_at = now
        job.source = ""
        await session.flush()
    return job


def progress(job: BulkJob) -> float:
    """Share done, 0..1 (1 once the job ended)."""
    if job.status == BULK_DONE:
        return 1.0
    if not job.total:
        return 0.0
    return min(1.0, job.processed / job.total)
