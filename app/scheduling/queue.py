"""The job queue interface, and the durable database queue that is the embedded default.

Both backends take the same :class:`~app.scheduling.jobs.JobSpec` and run the same handlers, and
keep the same interface (:class:`JobQueue`): one job or many (``enqueue_many``), a time to run at,
and a priority (lower values first among a queue's due jobs). ``enqueue(uow, ...)`` ties the job
to a unit of work: the database queue writes the row inside that transaction (so it commits or
vanishes with it, :attr:`JobQueue.transactional`); the arq queue publishes after the commit.

The consuming side is built for batches (its statements: :mod:`app.scheduling.job_statements`).
The lease is the shared claim primitive (:mod:`app.scheduling.claim`): one statement claims up to
``limit`` due jobs of every queue the worker serves (the priority queue's first, then by priority
and due time) and, on PostgreSQL, marks the previous batch's finished jobs done in the same round
trip (a ``WITH`` prelude). On PostgreSQL these single statements run in autocommit mode
(:mod:`app.db.kept_connections`): each is atomic on its own, and skipping
``BEGIN``/``COMMIT`` saves two round trips per batch. On SQLite they run in one
``BEGIN IMMEDIATE`` unit of work (SQLite has no row locks; the write lock serialises the leasers).
Completions and failed attempts are written for many jobs at once (:meth:`DatabaseQueue.complete`,
:meth:`DatabaseQueue.fail_many`): one statement per outcome and one commit per flush.

Every state change of a leased job is conditional on ``(id, attempts)`` and the job still
running, so a worker whose lease expired (and whose job was handed to another worker) cannot
overwrite the newer attempt's outcome: at-least-once delivery, never a lost or doubly-recorded
result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol
from uuid import uuid4

from sqlalchemy import ColumnElement, ScalarSelect, TextClause, and_, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from app.db.chunked import CHUNK_ROWS, delete_in_chunks
from app.db.kept_connections import KeptConnections
from app.scheduling import attempts as history
from app.scheduling import job_statements as statements
from app.scheduling.dead_rows import DeadJob, list_dead_jobs, revive_row
from app.scheduling.job_statements import JOB_CLAIM, Finished, lease_order
from app.scheduling.jobs import JobSpec
from app.scheduling.models import (
    DONE_ROWS,
    ENDED_ROWS,
    JOB_DEAD,
    JOB_QUEUED,
    JOB_RUNNING,
    JOBS,
    QUEUED_ROWS,
    RUNNING_ROWS,
    Job,
    in_index,
)

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database, UnitOfWork, WriteSession

log = logging.getLogger(__name__)

LEASE_EXPIRED_ERROR = "lease expired: the worker holding this job stopped"


@dataclass(frozen=True, slots=True)
class QueueStats:
    queued: int
    running: int
    dead: int
    done: int


@dataclass(frozen=True, slots=True)
class LeasedJob:
    id: str
    name: str
    payload: bytes
    attempts: int
    """This attempt's number (1 for the first run); part of every later state change's condition."""
    max_tries: int


QueuedJob = tuple[JobSpec[Any], Any, str | None]
"""One job of :meth:`JobQueue.enqueue_many`: ``(spec, payload, job id)``; no id: a fresh one."""


class JobQueue(Protocol):
    backend: str
    transactional: bool
    """True: jobs enqueued with a unit of work are written in its transaction, so they exist
    exactly when it commits. False: they are published to a broker after the commit, and a failed
    publish is only logged — a caller that must know publishes after its commit itself
    (``uow=None``), where the failure is raised."""

    async def enqueue(
        self,
        uow: UnitOfWork | None,
        spec: JobSpec[Any],
        payload: Any,
        *,
        job_id: str | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> None:
        """Queue one job; with ``uow`` it becomes visible only if that unit of work commits.
        Among a queue's due jobs lower ``priority`` values run first."""
        ...

    async def enqueue_many(
        self,
        uow: UnitOfWork | None,
        jobs: Sequence[QueuedJob],
        *,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> None:
        """Queue many jobs at once (one statement on the database), like :meth:`enqueue`."""
        ...

    async def housekeep(self, finished_before: datetime) -> None:
        """Requeue jobs whose worker died and forget jobs finished before ``finished_before``; a
        backend whose broker does both itself has nothing to do."""
        ...

    async def revive(
        self, uow: UnitOfWork, job: Job, *, queue: str, max_tries: int, run_at: datetime
    ) -> bool:
        """Hand a dead ``job`` back to the queue, its tries counted afresh, under the same id
        (and so the same idempotency key), to run at ``run_at`` on ``queue``. False when the job
        is no longer dead (another request revived or discarded it first)."""
        ...

    async def stats(self) -> QueueStats: ...

    async def dead_jobs(self, limit: int = 50) -> list[DeadJob]: ...

    async def ping(self) -> bool: ...

    async def aclose(self) -> None: ...


def insert_ignoring_duplicates(dialect: str) -> Any:
    """``INSERT … ON CONFLICT DO NOTHING`` for the given dialect."""
    module: Any = postgresql if dialect == "postgresql" else sqlite
    return module.insert(Job).on_conflict_do_nothing(index_elements=["id"])


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """An attempt that failed: the job goes back to the queue at ``retry_at``, or is dead."""

    id: str
    attempts: int
    error: str
    retry_at: datetime
    dead: bool


KEPT_CONNECTIONS = 4
"""Autocommit connections a PostgreSQL queue keeps between leases: one for each leasing loop of a
process by default (``JOB_LEASE_LOOPS``); a busier process opens more and closes the extra ones."""


class DatabaseQueue:
    """Durable queue in the application database (SQLite or PostgreSQL)."""

    backend = "database"
    transactional = True

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock
        self._listeners: list[Callable[[], None]] = []
        self._connections = KeptConnections(db, keep=KEPT_CONNECTIONS)

    # -- producing ---------------------------------------------------------------------------

    def _row(
        self,
        spec: JobSpec[Any],
        payload: Any,
        job_id: str | None,
        run_at: datetime | None,
        priority: int,
        now: datetime,
    ) -> dict[str, Any]:
        return {
            "id": job_id or f"{spec.name}:{uuid4().hex}",
            "name": spec.name,
            "queue": spec.queue,
            "priority": priority,
            "payload": spec.encode(payload),
            **JOBS.create(JOB_QUEUED),
            "attempts": 0,
            "max_tries": spec.max_tries,
            "run_at": run_at or now,
            "created_at": now,
        }

    async def insert_rows(self, session: WriteSession, rows: list[dict[str, Any]]) -> None:
        """Insert job rows in one statement; an id that already exists is skipped (deduplication)."""
        if rows:
            await session.execute(insert_ignoring_duplicates(self.db.dialect), rows)

    async def enqueue(
        self,
        uow: UnitOfWork | None,
        spec: JobSpec[Any],
        payload: Any,
        *,
        job_id: str | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> None:
        """Queue one job. Lower ``priority`` values run first within a queue."""
        await self.enqueue_many(uow, [(spec, payload, job_id)], run_at=run_at, priority=priority)

    async def enqueue_many(
        self,
        uow: UnitOfWork | None,
        jobs: Sequence[QueuedJob],
        *,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> None:
        """Queue many jobs in one statement: ``(spec, payload, job_id)`` triples."""
        now = self.clock.now()
        rows = [
            self._row(spec, payload, job_id, run_at, priority, now)
            for spec, payload, job_id in jobs
        ]
        if uow is None:
            async with self.db.write() as own:
                await self.insert_rows(own.session, rows)
                own.after_commit(self._notify)
            return
        await self.insert_rows(uow.session, rows)
        uow.after_commit(self._notify)

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` whenever this process commits new jobs; returns the unsubscriber."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()

    # -- consuming ---------------------------------------------------------------------------

    async def lease(
        self,
        worker_id: str,
        queues: Sequence[str],
        limit: int,
        lease_seconds: float,
        *,
        finished: Sequence[Finished] = (),
    ) -> list[LeasedJob]:
        """Mark ``finished`` jobs done and claim up to ``limit`` due jobs of ``queues``, in one
        statement (PostgreSQL) or one unit of work (SQLite): the priority queue's first, then by
        priority and due time (:data:`JOB_CLAIM`). Use :meth:`complete` when there is nothing to
        lease."""
        now = self.clock.now()
        order = lease_order(queues)
        if not self.db.is_postgres:
            return await self._lease_sqlite(worker_id, order, limit, now, lease_seconds, finished)
        args: dict[str, Any] = {
            "now": now,
            "expires": now + timedelta(seconds=lease_seconds),
            "owner": worker_id,
            "limit": limit,
            **JOB_CLAIM.partition_arguments(order),
        }
        if finished:
            args.update(statements.done_params(now, finished))
            sql, names = JOB_CLAIM.native_postgres(
                prelude=statements.PG_COMPLETE_PRELUDE, partitions=len(order)
            )
        else:
            sql, names = JOB_CLAIM.native_postgres(partitions=len(order))
        async with self._connections.driver() as driver:
            # Straight to the driver: the SQL layer's parameter and row handling cost more per
            # batch than the rest of the lease's Python.
            return _leased(await driver.fetch(sql, *[args[name] for name in names]))

    async def _lease_sqlite(
        self,
        worker_id: str,
        queues: list[str],
        limit: int,
        now: datetime,
        lease_seconds: float,
        finished: Sequence[Finished],
    ) -> list[LeasedJob]:
        async with self.db.write() as uow:
            if finished:
                await uow.session.execute(
                    statements.SQLITE_COMPLETE, statements.sqlite_done_params(now, finished)
                )
            rows = await JOB_CLAIM.take_in(
                uow.session,
                now=now,
                limit=limit,
                owner=worker_id,
                lease_seconds=lease_seconds,
                partitions=queues,
            )
        return _leased(rows)

    async def complete(self, finished: Sequence[Finished]) -> None:
        """Mark finished jobs done in one statement; a job re-leased meanwhile is left alone."""
        if not finished:
            return
        now = self.clock.now()
        if self.db.is_postgres:
            async with self._connections.connection() as conn:
                await conn.execute(statements.PG_COMPLETE, statements.done_params(now, finished))
            return
        async with self.db.write() as uow:
            await uow.session.execute(
                statements.SQLITE_COMPLETE, statements.sqlite_done_params(now, finished)
            )

    async def fail(
        self, job: LeasedJob, error: str, retry_at: datetime, *, give_up: bool = False
    ) -> bool:
        """Record a failed attempt: back to the queue at ``retry_at``, or dead after the last try
        (or at once with ``give_up``, for a job that can never succeed). Returns ``True`` when the
        job is now dead."""
        failed = failed_attempt(job, error, retry_at, give_up=give_up)
        await self.fail_many([failed])
        return failed.dead

    async def fail_many(self, failures: Sequence[FailedAttempt]) -> None:
        """Record many failed attempts: one statement and one commit for all of them. A job
        re-leased meanwhile (its lease expired) is left alone, as with completions."""
        if not failures:
            return
        now = self.clock.now()
        async with self.db.write() as uow:
            await history.record_failures(
                uow.session, now, [(f.id, f.attempts, f.error, f.dead) for f in failures]
            )
            retried = [f for f in failures if not f.dead]
            dead = [f for f in failures if f.dead]
            # One statement per outcome that occurs (a statement moves its rows to one state).
            for statement, group, dead_at in (
                (statements.RETRY, retried, None),
                (statements.BURY, dead, now),
            ):
                if group:
                    await uow.session.execute(statement, _failure_params(group, dead_at))

    async def release(self, jobs: Sequence[LeasedJob]) -> None:
        """Give leased jobs back without counting the attempt (graceful shutdown)."""
        if not jobs:
            return
        async with self.db.write() as uow:
            await uow.session.execute(
                statements.RELEASE, [{"jid": j.id, "att": j.attempts} for j in jobs]
            )

    async def extend_leases(self, worker_id: str, lease_seconds: float) -> set[Finished]:
        """Push back the lease expiry of every job ``worker_id`` holds (its heartbeat), so a job
        that runs longer than one lease is not handed to another worker while it is alive.

        Returns the ``(job id, attempt)`` pairs still held: a running job missing from it lost
        its lease (it expired and another worker, or a later attempt, has the job now)."""
        until = self.clock.now() + timedelta(seconds=lease_seconds)
        async with self.db.write() as uow:
            result = await uow.session.execute(
                update(Job.__table__)  # type: ignore[arg-type]
                .where(in_index(RUNNING_ROWS), Job.leased_by == worker_id)
                .values(lease_expires_at=until)
                .returning(Job.id, Job.attempts)
            )
            return {(str(jid), int(att)) for jid, att in result.all()}

    async def recover_expired(self) -> int:
        """Requeue jobs whose worker died (lease expired); dead when they are out of tries."""
        now = self.clock.now()
        jobs: Any = Job.__table__
        # The literal state, beside the transition's guard, lets the planner find the expired
        # leases in ix_jobs_running_lease.
        expired = update(jobs).where(in_index(RUNNING_ROWS), Job.lease_expires_at < now)
        out_of_tries = Job.attempts >= Job.max_tries
        lost = {"lease_expires_at": None, "leased_by": None, "last_error": LEASE_EXPIRED_ERROR}
        returning = (Job.id, Job.name, Job.attempts, Job.status)
        async with self.db.write() as uow:
            holders = await history.expired_holders(uow.session, now)
            # Two statements, one per outcome: a statement moves its rows to one state.
            buried = await uow.session.execute(
                JOBS.transition(expired.where(out_of_tries), JOB_DEAD, from_=(JOB_RUNNING,))
                .values(finished_at=now, **lost)
                .returning(*returning)
            )
            requeued = await uow.session.execute(
                JOBS.transition(expired.where(~out_of_tries), JOB_QUEUED, from_=(JOB_RUNNING,))
                .values(finished_at=None, **lost)
                .returning(*returning)
            )
            recovered = [*buried.all(), *requeued.all()]
            await history.record_lost(uow.session, now, recovered, holders, LEASE_EXPIRED_ERROR)
        return len(recovered)

    async def purge_finished(self, older_than: datetime, *, chunk_rows: int = CHUNK_ROWS) -> int:
        """Delete done jobs finished before ``older_than`` (until then their ids deduplicate), in
        chunks of short transactions: a busy day's jobs never hold the write lock at once."""
        return await delete_in_chunks(
            self.db,
            Job.__table__,  # type: ignore[arg-type]
            done_before(older_than),
            key=[Job.id],
            chunk_rows=chunk_rows,
        )

    async def housekeep(self, finished_before: datetime) -> None:
        await self.recover_expired()
        await self.purge_finished(finished_before)

    async def revive(
        self, uow: UnitOfWork, job: Job, *, queue: str, max_tries: int, run_at: datetime
    ) -> bool:
        revived = await revive_row(uow.session, job, queue=queue, max_tries=max_tries, at=run_at)
        if revived:
            uow.after_commit(self._notify)
        return revived

    # -- observing ---------------------------------------------------------------------------

    async def stats(self) -> QueueStats:
        async with self.db.read() as session:
            queued, running, dead, done = (await session.execute(STATS)).one()
        return QueueStats(queued=queued, running=running, dead=dead, done=done)

    async def dead_jobs(self, limit: int = 50) -> list[DeadJob]:
        return await list_dead_jobs(self.db, limit)

    async def ping(self) -> bool:
        return await self.db.ping()

    async def aclose(self) -> None:
        await self._connections.aclose()


def done_before(older_than: datetime) -> ColumnElement[bool]:
    """Done jobs finished before ``older_than``: what the purge deletes, found in
    ix_jobs_done_finished."""
    return and_(in_index(DONE_ROWS), Job.finished_at < older_than)


def _count(rows: TextClause) -> ScalarSelect[int]:
    return select(func.count()).select_from(Job).where(rows).scalar_subquery()


STATS = select(
    _count(in_index(QUEUED_ROWS)),
    _count(in_index(RUNNING_ROWS)),
    _count(in_index(ENDED_ROWS, JOB_DEAD)),
    _count(in_index(DONE_ROWS)),
)
"""How many jobs are queued, running, dead and done: one count per state, each over the partial
index of its state (a ``GROUP BY status`` reads the whole table, the purge's backlog included)."""


def failed_attempt(
    job: LeasedJob, error: str, retry_at: datetime, *, give_up: bool = False
) -> FailedAttempt:
    """The failed attempt of ``job``: dead after its last try, or at once with ``give_up``."""
    dead = give_up or job.attempts >= job.max_tries
    return FailedAttempt(job.id, job.attempts, error, retry_at, dead)


def _leased(rows: Sequence[Any]) -> list[LeasedJob]:
    return [
        LeasedJob(jid, name, bytes(payload), att, tries) for jid, name, payload, att, tries in rows
    ]


def _failure_params(failures: Sequence[FailedAttempt], dead_at: datetime | None) -> list[Any]:
    died = {} if dead_at is None else {"dead_at": dead_at}
    return [
        {
            "jid": f.id,
            "att": f.attempts,
            "retry_at": f.retry_at,
            "error": f.error[: history.MAX_ERROR_CHARS],
            **died,
        }
        for f in failures
    ]
