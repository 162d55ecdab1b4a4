"""A dead job's row, which both backends keep: written when a job runs out of tries (an arq job
has no row before that), listed for a person, and put back to ``queued`` when it is revived."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, select, update
from sqlalchemy.dialects import postgresql, sqlite

from app.db.dialect import row_count
from app.scheduling import attempts as history
from app.scheduling.models import ENDED_ROWS, JOB_DEAD, JOB_QUEUED, JOBS, Job, in_index

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database, WriteSession


@dataclass(frozen=True, slots=True)
class DeadJob:
    id: str
    name: str
    attempts: int
    last_error: str | None
    finished_at: datetime | None


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
            {
                "id": job_id,
                "name": name,
                "queue": "dead",
                "priority": 0,
                "payload": payload,
                **JOBS.create(JOB_DEAD),
                "attempts": attempts,
                "max_tries": attempts,
                "run_at": now,
                "created_at": now,
                "finished_at": now,
                "last_error": error[: history.MAX_ERROR_CHARS],
            },
        )


def _dead_upsert(dialect: str) -> Any:
    module: Any = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(Job)
    fresh = statement.excluded
    # An existing row dies again from any state the machine lets die (a done job stays done).
    dying = (*JOBS.sources(JOB_DEAD), JOB_DEAD)
    return statement.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "status": fresh.status,
            "attempts": fresh.attempts,
            "last_error": fresh.last_error,
            "finished_at": fresh.finished_at,
            "leased_by": None,
        },
        where=Job.status.in_(dying),
    )


async def list_dead_jobs(db: Database, limit: int) -> list[DeadJob]:
    async with db.read() as session:
        rows = (await session.execute(dead_listing(limit))).scalars()
        return [DeadJob(j.id, j.name, j.attempts, j.last_error, j.finished_at) for j in rows]


def dead_listing(limit: int) -> Select[Any]:
    """The latest dead jobs, from ix_jobs_ended_finished (the state as literal SQL, which the
    partial index needs)."""
    return (
        select(Job)
        .where(in_index(ENDED_ROWS, JOB_DEAD))
        .order_by(Job.finished_at.desc())
        .limit(limit)
    )


async def revive_row(
    session: WriteSession, job: Job, *, queue: str, max_tries: int, at: datetime
) -> bool:
    """Put a dead job's row back to ``queued`` at ``at``, its tries counted afresh; False when it
    is not dead any more (the condition makes two racing revivals revive it once)."""
    result = await session.execute(
        JOBS.transition(
            update(Job.__table__).where(Job.id == job.id),  # type: ignore[arg-type]
            JOB_QUEUED,
            from_=(JOB_DEAD,),
        ).values(
            queue=queue,
            attempts=0,
            max_tries=max_tries,
            run_at=at,
            finished_at=None,
            lease_expires_at=None,
            leased_by=None,
        )
    )
    return bool(row_count(result))
