"""The job queue interface, and the durable database queue that is the embedded default.

Both backends take the same :class:`~app.scheduling.jobs.JobSpec` and run the same handlers, and
keep the same interface (:class:`JobQueue`): one job or many (``enqueue_many``), a time to run at,
and a priority (lower values first among a queue's due jobs). ``enqueue(uow, ...)`` ties the job
to a unit of work: the database queue writes the row inside that transaction (so it commits or
vanishes with it, :attr:`JobQueue.transactional`); the arq queue publishes after the commit.

The consuming side is built for batches. The lease is the shared claim primitive
(:data:`JOB_CLAIM`, :mod:`app.scheduling.claim`): one statement claims up to ``limit`` due jobs of
every queue the worker serves (the priority queue's first, then by priority and due time) and, on
PostgreSQL, marks the previous batch's finished jobs done in the same round trip (a ``WITH``
prelude). On PostgreSQL these single statements run in autocommit mode: each is atomic on its own,
and skipping ``BEGIN``/``COMMIT`` saves two round trips per batch. On SQLite they run in one
``BEGIN IMMEDIATE`` unit of work (SQLite has no row locks; the write lock serialises the leasers).
Completions and failed attempts are written for many jobs at once (:meth:`DatabaseQueue.complete`,
:meth:`DatabaseQueue.fail_many`): one statement and one commit per flush.

Every state change of a leased job is conditional on ``(id, attempts, status = 'running')``, so a
worker whose lease expired (and whose job was handed to another worker) cannot overwrite the newer
attempt's outcome: at-least-once delivery, never a lost or doubly-recorded result.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol
from uuid import uuid4

from sqlalchemy import and_, bindparam, case, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.chunked import CHUNK_ROWS, delete_in_chunks
from app.db.types import UTCDateTime
from app.scheduling import attempts as history
from app.scheduling.claim import Claim
from app.scheduling.jobs import PRIORITY_QUEUE, JobSpec
from app.scheduling.models import JOB_DEAD, JOB_DONE, JOB_QUEUED, JOB_RUNNING, Job

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database, UnitOfWork, WriteSession

log = logging.getLogger(__name__)

LEASE_EXPIRED_ERROR = "lease expired: the worker holding this job stopped"
MAX_ERROR_CHARS = 4000

KEPT_CONNECTIONS = 4
"""Autocommit connections a PostgreSQL queue keeps between leases: one for each leasing loop of a
process by default (``JOB_LEASE_LOOPS``); a busier process opens more and closes the extra ones."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    queued: int
    running: int
    dead: int
    done: int


@dataclass(frozen=True, slots=True)
class DeadJob:
    id: str
    name: str
    attempts: int
    last_error: str | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class LeasedJob:
    id: str
    name: str
    payload: bytes
    attempts: int
    """This attempt's number (1 for the first run); part of every later state change's condition."""
    max_tries: int


Finished = tuple[str, int]
"""A job that ran to completion: ``(job id, attempt number)``."""


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


async def record_dead_job(
    db: Database, clock: Clock, *, job_id: str, name: str, payload: bytes, attempts: int, error: str
) -> None:
    """Keep a job that exhausted its tries, with its last error, and the attempt in its history
    (both backends show these). A revived job that dies again is dead again."""
    now = clock.now()
    async with db.write() as uow:
        await history.record_arq_attempt(
            uow.session, now, job_id=job_id, name=name, attempt=attempts, error=error, dead=True
        )
        await uow.session.execute(
            _dead_upsert(db.dialect),
            [
                {
                    "id": job_id,
                    "name": name,
                    "queue": "dead",
                    "priority": 0,
                    "payload": payload,
                    "status": JOB_DEAD,
                    "attempts": attempts,
                    "max_tries": attempts,
                    "run_at": now,
                    "created_at": now,
                    "finished_at": now,
                    "last_error": error[:MAX_ERROR_CHARS],
                }
            ],
        )


def _dead_upsert(dialect: str) -> Any:
    module: Any = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(Job)
    fresh = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "status": fresh.status,
            "attempts": fresh.attempts,
            "last_error": fresh.last_error,
            "finished_at": fresh.finished_at,
            "leased_by": None,
        },
        where=Job.status != JOB_DONE,
    )


def lease_order(queues: Sequence[str]) -> list[str]:
    """The order queues are leased from: the priority queue first, then the others by name."""
    unique = sorted(set(queues))
    if PRIORITY_QUEUE in unique:
        unique.remove(PRIORITY_QUEUE)
        unique.insert(0, PRIORITY_QUEUE)
    return unique


# -- statements ---------------------------------------------------------------------------------
# The lease is the shared claim primitive; the completions are plain SQL: they run once per batch
# on the hot path, and spelling out unnest and the data-modifying CTE is clearer here than their
# ORM equivalents. Only constants are interpolated.


def _sql(statement: str) -> Any:
    """A textual statement whose ``now``/``expires`` parameters are bound as UTC timestamps."""
    stmt = text(statement)
    times = [bindparam(k, type_=UTCDateTime()) for k in ("now", "expires") if f":{k}" in statement]
    return stmt.bindparams(*times)


# Due jobs of every queue a worker serves, in one statement: the queues in lease order (the priority
# queue first), within a queue lower priority values first, then the longest due. Each queue is its
# own scan of ix_jobs_leasable (queue, priority, run_at), read in order from its front however many
# jobs wait. Claiming a job counts the attempt; the attempt number is part of every later state
# change's condition.
JOB_CLAIM = Claim(
    table=Job.__table__,  # type: ignore[arg-type]
    due=f"status = '{JOB_QUEUED}' AND run_at <= :now",
    order_by="priority, run_at",
    returning=("id", "name", "payload", "attempts", "max_tries"),
    owner="leased_by",
    expires="lease_expires_at",
    sets={"status": f"'{JOB_RUNNING}'", "attempts": "attempts + 1"},
    held=f"status = '{JOB_RUNNING}'",
    partition="queue",
)

# Finished jobs: their ids (`id = ANY(…)`, found by primary key) and "id attempt" keys, matched
# with a hash of the array rather than a join against an unnested one (which compared every row
# with every key: 10,000 comparisons for a batch of 100). The status is compared as `status || ''`
# so that the planner cannot use the partial index of running jobs instead: a bitmap scan of it
# reads every entry that finished jobs left in it since the last vacuum (bitmap scans never mark
# dead entries), a cost that grows with the jobs drained, where the primary key reads the 100.
_PG_FINISH = f"""
    UPDATE jobs SET status = '{JOB_DONE}', finished_at = :now, lease_expires_at = NULL
    WHERE jobs.id = ANY(CAST(:done_ids AS varchar[]))
      AND jobs.id || ' ' || jobs.attempts = ANY(CAST(:done_keys AS text[]))
      AND jobs.status || '' = '{JOB_RUNNING}'
"""  # noqa: S608

# The previous batch's completions ride along with the next lease, written before the lease takes
# any row (see Claim.statement).
PG_COMPLETE_PRELUDE = f"WITH finished AS ({_PG_FINISH} RETURNING jobs.id)"

_PG_COMPLETE = _sql(_PG_FINISH)

_SQLITE_COMPLETE = _sql(
    f"""
    UPDATE jobs SET status = '{JOB_DONE}', finished_at = :now, lease_expires_at = NULL
    WHERE id = :done_id AND attempts = :done_attempt AND status = '{JOB_RUNNING}'
    """  # noqa: S608
)

# One failed attempt per parameter set: back to the queue at its retry time, or dead.
_FAIL = (
    Job.__table__.update()  # type: ignore[attr-defined]
    .where(
        Job.id == bindparam("jid"),
        Job.attempts == bindparam("att"),
        Job.status == JOB_RUNNING,
    )
    .values(
        status=bindparam("new_status"),
        run_at=bindparam("retry_at"),
        last_error=bindparam("error"),
        lease_expires_at=None,
        leased_by=None,
        finished_at=bindparam("dead_at"),
    )
)


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """An attempt that failed: the job goes back to the queue at ``retry_at``, or is dead."""

    id: str
    attempts: int
    error: str
    retry_at: datetime
    dead: bool


class DatabaseQueue:
    """Durable queue in the application database (SQLite or PostgreSQL)."""

    backend = "database"
    transactional = True

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock
        self._listeners: list[Callable[[], None]] = []
        self._kept: list[AsyncConnection] = []

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
            "status": JOB_QUEUED,
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

    @asynccontextmanager
    async def _autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A PostgreSQL connection where each statement commits on its own (see module doc).

        Connections are kept between leases (up to :data:`KEPT_CONNECTIONS`): a checkout from the
        pool pings the connection first, one more round trip for every lease. A connection whose
        statement raised is closed instead (it may be broken); the next lease opens a fresh one.
        """
        conn = self._kept.pop() if self._kept else await self._connect()
        try:
            yield conn
        except BaseException:
            with suppress(Exception):
                await conn.close()
            raise
        if len(self._kept) < KEPT_CONNECTIONS:
            self._kept.append(conn)
        else:
            await conn.close()

    async def _connect(self) -> AsyncConnection:
        conn = await self.db.write_engine.connect()
        return await conn.execution_options(isolation_level="AUTOCOMMIT")

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
            args.update(_done_params(now, finished))
            sql, names = JOB_CLAIM.native_postgres(
                prelude=PG_COMPLETE_PRELUDE, partitions=len(order)
            )
        else:
            sql, names = JOB_CLAIM.native_postgres(partitions=len(order))
        async with self._autocommit() as conn:
            # Straight to the driver (its statement cache prepares the lease once per
            # connection): the SQL layer's parameter and row handling cost more per batch than
            # the rest of the lease's Python.
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
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
                    _SQLITE_COMPLETE,
                    [{"now": now, "done_id": jid, "done_attempt": att} for jid, att in finished],
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
            async with self._autocommit() as conn:
                await conn.execute(_PG_COMPLETE, _done_params(now, finished))
            return
        async with self.db.write() as uow:
            await uow.session.execute(
                _SQLITE_COMPLETE,
                [{"now": now, "done_id": jid, "done_attempt": att} for jid, att in finished],
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
            await uow.session.execute(
                _FAIL,
                [
                    {
                        "jid": f.id,
                        "att": f.attempts,
                        "new_status": JOB_DEAD if f.dead else JOB_QUEUED,
                        "retry_at": f.retry_at,
                        "error": f.error[:MAX_ERROR_CHARS],
                        "dead_at": now if f.dead else None,
                    }
                    for f in failures
                ],
            )

    async def release(self, jobs: Sequence[LeasedJob]) -> None:
        """Give leased jobs back without counting the attempt (graceful shutdown)."""
        if not jobs:
            return
        async with self.db.write() as uow:
            await uow.session.execute(
                Job.__table__.update()  # type: ignore[attr-defined]
                .where(
                    Job.id == bindparam("jid"),
                    Job.attempts == bindparam("att"),
                    Job.status == JOB_RUNNING,
                )
                .values(
                    status=JOB_QUEUED,
                    attempts=Job.attempts - 1,
                    lease_expires_at=None,
                    leased_by=None,
                ),
                [{"jid": j.id, "att": j.attempts} for j in jobs],
            )

    async def extend_leases(self, worker_id: str, lease_seconds: float) -> set[Finished]:
        """Push back the lease expiry of every job ``worker_id`` holds (its heartbeat), so a job
        that runs longer than one lease is not handed to another worker while it is alive.

        Returns the ``(job id, attempt)`` pairs still held: a running job missing from it lost
        its lease (it expired and another worker, or a later attempt, has the job now)."""
        until = self.clock.now() + timedelta(seconds=lease_seconds)
        async with self.db.write() as uow:
            result = await uow.session.execute(
                Job.__table__.update()  # type: ignore[attr-defined]
                .where(Job.status == JOB_RUNNING, Job.leased_by == worker_id)
                .values(lease_expires_at=until)
                .returning(Job.id, Job.attempts)
            )
            return {(str(jid), int(att)) for jid, att in result.all()}

    async def recover_expired(self) -> int:
        """Requeue jobs whose worker died (lease expired); dead when they are out of tries."""
        now = self.clock.now()
        out_of_tries = Job.attempts >= Job.max_tries
        async with self.db.write() as uow:
            holders = await history.expired_holders(uow.session, now)
            result = await uow.session.execute(
                Job.__table__.update()  # type: ignore[attr-defined]
                .where(Job.status == JOB_RUNNING, Job.lease_expires_at < now)
                .values(
                    status=case((out_of_tries, JOB_DEAD), else_=JOB_QUEUED),
                    finished_at=case((out_of_tries, now), else_=None),
                    lease_expires_at=None,
                    leased_by=None,
                    last_error=LEASE_EXPIRED_ERROR,
                )
                .returning(Job.id, Job.name, Job.attempts, Job.status)
            )
            recovered = result.all()
            await history.record_lost(uow.session, now, recovered, holders, LEASE_EXPIRED_ERROR)
        return len(recovered)

    async def purge_finished(self, older_than: datetime, *, chunk_rows: int = CHUNK_ROWS) -> int:
        """Delete done jobs finished before ``older_than`` (until then their ids deduplicate), in
        chunks of short transactions: a busy day's jobs never hold the write lock at once."""
        return await delete_in_chunks(
            self.db,
            Job.__table__,  # type: ignore[arg-type]
            and_(Job.status == JOB_DONE, Job.finished_at < older_than),
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
            rows = dict(
                (await session.execute(select(Job.status, func.count()).group_by(Job.status))).all()
            )
        return QueueStats(
            queued=int(rows.get(JOB_QUEUED, 0)),
            running=int(rows.get(JOB_RUNNING, 0)),
            dead=int(rows.get(JOB_DEAD, 0)),
            done=int(rows.get(JOB_DONE, 0)),
        )

    async def dead_jobs(self, limit: int = 50) -> list[DeadJob]:
        return await list_dead_jobs(self.db, limit)

    async def ping(self) -> bool:
        return await self.db.ping()

    async def aclose(self) -> None:
        kept, self._kept = self._kept, []
        for conn in kept:
            with suppress(Exception):
                await conn.close()


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


def _done_params(now: datetime, finished: Sequence[Finished]) -> dict[str, Any]:
    return {
        "now": now,
        "done_ids": [jid for jid, _ in finished],
        "done_keys": [f"{jid} {att}" for jid, att in finished],
    }


async def list_dead_jobs(db: Database, limit: int) -> list[DeadJob]:
    async with db.read() as session:
        rows = (
            await session.execute(
                select(Job)
                .where(Job.status == JOB_DEAD)
                .order_by(Job.finished_at.desc())
                .limit(limit)
            )
        ).scalars()
        return [DeadJob(j.id, j.name, j.attempts, j.last_error, j.finished_at) for j in rows]


async def revive_row(
    session: WriteSession, job: Job, *, queue: str, max_tries: int, at: datetime
) -> bool:
    """Put a dead job's row back to ``queued`` at ``at``, its tries counted afresh; False when it
    is not dead any more (the condition makes two racing revivals revive it once)."""
    result = await session.execute(
        Job.__table__.update()  # type: ignore[attr-defined]
        .where(Job.id == job.id, Job.status == JOB_DEAD)
        .values(
            status=JOB_QUEUED,
            queue=queue,
            attempts=0,
            max_tries=max_tries,
            run_at=at,
            finished_at=None,
            lease_expires_at=None,
            leased_by=None,
        )
    )
    return bool(getattr(result, "rowcount", 0))
