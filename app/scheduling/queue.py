"""The job queue interface, and the durable database queue that is the embedded default.

Both backends take the same :class:`~app.scheduling.jobs.JobSpec` and run the same handlers.
``enqueue(uow, ...)`` ties the job to a unit of work: the database queue writes the row inside that
transaction (so it commits or vanishes with it); the arq queue publishes after the commit.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol
from uuid import uuid4

from sqlalchemy import bindparam, case, delete, func, select, text
from sqlalchemy.dialects import postgresql, sqlite

from app.db.types import UTCDateTime
from app.scheduling.models import JOB_DEAD, JOB_DONE, JOB_QUEUED, JOB_RUNNING, Job

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database, UnitOfWork, WriteSession
    from app.scheduling.jobs import JobSpec


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
    max_tries: int


class JobQueue(Protocol):
    backend: str

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
        """Queue one job; with ``uow`` it becomes visible only if that unit of work commits."""
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
    """Keep a job that exhausted its tries, with its last error (both backends show these)."""
    now = clock.now()
    async with db.write() as uow:
        await uow.session.execute(
            insert_ignoring_duplicates(db.dialect),
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
                    "last_error": error,
                }
            ],
        )


class DatabaseQueue:
    """Durable queue in the application database (SQLite or PostgreSQL)."""

    backend = "database"

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock
        self._wakeup = asyncio.Event()

    # -- producing ---------------------------------------------------------------------------

    def _row(
        self,
        spec: JobSpec[Any],
        payload: Any,
        job_id: str | None,
        run_at: datetime | None,
        priority: int,
    ) -> dict[str, Any]:
        now = self.clock.now()
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
        row = self._row(spec, payload, job_id, run_at, priority)
        if uow is None:
            async with self.db.write() as own:
                await self.insert_rows(own.session, [row])
                own.after_commit(self._notify)
            return
        await self.insert_rows(uow.session, [row])
        uow.after_commit(self._notify)

    async def enqueue_many(
        self, uow: UnitOfWork, items: list[tuple[JobSpec[Any], Any, str | None]]
    ) -> None:
        """Queue many jobs in one statement: ``(spec, payload, job_id)`` triples."""
        rows = [self._row(spec, payload, job_id, None, 0) for spec, payload, job_id in items]
        await self.insert_rows(uow.session, rows)
        uow.after_commit(self._notify)

    async def _notify(self) -> None:
        self._wakeup.set()

    async def wait_for_work(self, timeout: float) -> None:
        """Return when a job was queued in this process or after ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        self._wakeup.clear()

    # -- consuming ---------------------------------------------------------------------------

    async def lease(
        self, worker_id: str, queues: list[str], limit: int, lease_seconds: float
    ) -> list[LeasedJob]:
        """Claim up to ``limit`` due jobs in one statement (SKIP LOCKED on PostgreSQL).

        SQLite has no row locks; the write engine's ``BEGIN IMMEDIATE`` serialises the statement
        instead (``with_for_update`` would be silently dropped there).
        """
        now = self.clock.now()
        lock = " FOR UPDATE SKIP LOCKED" if self.db.is_postgres else ""
        stmt = text(
            f"""
            UPDATE jobs SET status = '{JOB_RUNNING}', attempts = attempts + 1,
                   lease_expires_at = :expires, leased_by = :worker
            WHERE id IN (
                SELECT id FROM jobs
                WHERE status = '{JOB_QUEUED}' AND queue IN :queues AND run_at <= :now
                ORDER BY priority, run_at
                LIMIT :limit{lock}
            )
            RETURNING id, name, payload, attempts, max_tries
            """  # noqa: S608 - only constants are interpolated
        ).bindparams(
            bindparam("expires", type_=UTCDateTime()),
            bindparam("now", type_=UTCDateTime()),
            bindparam("queues", expanding=True),
        )
        params = {
            "expires": now + timedelta(seconds=lease_seconds),
            "now": now,
            "worker": worker_id,
            "queues": list(queues),
            "limit": limit,
        }
        async with self.db.write() as uow:
            rows = (await uow.session.execute(stmt, params)).all()
        return [LeasedJob(r[0], r[1], bytes(r[2]), r[3], r[4]) for r in rows]

    async def complete(self, done: list[tuple[str, int]]) -> None:
        """Mark finished jobs done in one statement; a job re-leased meanwhile is left alone."""
        if not done:
            return
        now = self.clock.now()
        async with self.db.write() as uow:
            await uow.session.execute(
                Job.__table__.update()  # type: ignore[attr-defined]
                .where(
                    Job.id == bindparam("jid"),
                    Job.attempts == bindparam("att"),
                    Job.status == JOB_RUNNING,
                )
                .values(status=JOB_DONE, finished_at=now, lease_expires_at=None),
                [{"jid": jid, "att": att} for jid, att in done],
            )

    async def fail(self, job: LeasedJob, error: str, retry_at: datetime) -> bool:
        """Record a failure: back to the queue at ``retry_at``, or dead after the last try.

        Returns ``True`` when the job is now dead.
        """
        dead = job.attempts >= job.max_tries
        now = self.clock.now()
        async with self.db.write() as uow:
            await uow.session.execute(
                Job.__table__.update()  # type: ignore[attr-defined]
                .where(Job.id == job.id, Job.attempts == job.attempts, Job.status == JOB_RUNNING)
                .values(
                    status=JOB_DEAD if dead else JOB_QUEUED,
                    run_at=retry_at,
                    last_error=error[:4000],
                    lease_expires_at=None,
                    finished_at=now if dead else None,
                )
            )
        return dead

    async def release(self, jobs: list[LeasedJob]) -> None:
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
                .values(status=JOB_QUEUED, attempts=Job.attempts - 1, lease_expires_at=None),
                [{"jid": j.id, "att": j.attempts} for j in jobs],
            )

    async def recover_expired(self) -> int:
        """Requeue jobs whose worker died (lease expired); dead when out of tries."""
        now = self.clock.now()
        async with self.db.write() as uow:
            result = await uow.session.execute(
                Job.__table__.update()  # type: ignore[attr-defined]
                .where(Job.status == JOB_RUNNING, Job.lease_expires_at < now)
                .values(
                    status=_case_dead_or_queued(),
                    lease_expires_at=None,
                    last_error="lease expired: the worker holding this job stopped",
                    finished_at=None,
                )
            )
        return int(getattr(result, "rowcount", 0) or 0)

    async def purge_finished(self, older_than: datetime) -> int:
        async with self.db.write() as uow:
            result = await uow.session.execute(
                delete(Job).where(Job.status == JOB_DONE, Job.finished_at < older_than)
            )
        return int(getattr(result, "rowcount", 0) or 0)

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
        return None


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


def _case_dead_or_queued() -> Any:
    return case((Job.attempts >= Job.max_tries, JOB_DEAD), else_=JOB_QUEUED)
