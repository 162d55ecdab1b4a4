"""Dead-job operations: read a job with its history, and retry, requeue or discard a dead one.

A job dies after its last try (or at once, for an error retrying cannot help) and is kept with its
history (:mod:`app.scheduling.attempts`). A person who may see it (:mod:`app.scheduling.job_owners`:
the admins of its workspace, the instance's operators for every job) can:

- **retry** it: back to the queue now, its tries counted afresh, under the same id, so whatever
  the id deduplicates (its idempotency key) still holds;
- **requeue** it: the same, at a time they choose (now or later);
- **discard** it: ``discarded``, kept with its history, never run again.

Each action is one row of the job's history with who took it, written in the same transaction as
the change; an action on a job that is no longer dead answers 409 and changes nothing. Both queue
backends revive a job through :meth:`~app.scheduling.queue.JobQueue.revive`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, select, update

from app.db.dialect import row_count
from app.db.session import ReadSession, UnitOfWork
from app.errors import Conflict, NotFound, ValidationFailed
from app.scheduling import attempts as history
from app.scheduling.job_owners import Viewer, scoped
from app.scheduling.jobs import JobRegistry
from app.scheduling.models import (
    ACTION_DISCARDED,
    ACTION_REQUEUED,
    ACTION_RETRIED,
    ATTEMPT_DONE,
    ENDED_ROWS,
    JOB_DEAD,
    JOB_DISCARDED,
    JOB_DONE,
    JOB_RUNNING,
    JOBS,
    Job,
    JobAttempt,
    in_index,
)
from app.scheduling.queue import JobQueue

MAX_LIST = 200
REQUEUE_HORIZON = timedelta(days=365)
"""How far ahead a job may be requeued."""
LISTED_STATUSES = (JOB_DEAD, JOB_DISCARDED)


class JobNotFound(NotFound):
    code = "job_not_found"


class JobNotDead(Conflict):
    code = "job_not_dead"


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One line of a job's history: an attempt's end, or a person's action."""

    attempt: int
    outcome: str
    """``failed``, ``dead``, ``lost``, ``done``, ``running``; or ``retried``, ``requeued``,
    ``discarded`` for an action."""
    at: datetime | None
    worker: str | None
    """Where the attempt ran, or who took the action."""
    error: str | None


def history_of(job: Job, recorded: list[JobAttempt]) -> list[HistoryEntry]:
    """The recorded entries, oldest first, then the attempt the job's row itself holds: the
    successful one of a done job, or the one running now."""
    entries = [
        HistoryEntry(a.attempt, a.outcome, a.finished_at, a.worker, a.error) for a in recorded
    ]
    if job.status == JOB_DONE:
        entries.append(
            HistoryEntry(job.attempts, ATTEMPT_DONE, job.finished_at, job.leased_by, None)
        )
    elif job.status == JOB_RUNNING:
        entries.append(HistoryEntry(job.attempts, JOB_RUNNING, None, job.leased_by, None))
    return entries


async def list_jobs(
    session: ReadSession,
    viewer: Viewer,
    *,
    status: str = JOB_DEAD,
    limit: int = 50,
    offset: int = 0,
) -> list[Job]:
    """Dead (or discarded) jobs ``viewer`` may see, the latest to end first, from ``offset``."""
    if status not in LISTED_STATUSES:
        raise ValidationFailed.field("status", "choose dead or discarded")
    return list(await session.scalars(listing(viewer, status, limit=limit, offset=offset)))


def listing(viewer: Viewer, status: str, *, limit: int = 50, offset: int = 0) -> Select[Any]:
    """The statement of :func:`list_jobs`. The state is literal SQL (``status`` is one of
    :data:`LISTED_STATUSES`), so the partial indexes of ended jobs serve it: the operators' list
    reads ix_jobs_ended_finished, a workspace's ix_jobs_ended_workspace, newest first."""
    statement = (
        select(Job)
        .where(in_index(ENDED_ROWS, status))
        .order_by(Job.finished_at.desc(), Job.id)
        .offset(offset)
        .limit(max(1, min(limit, MAX_LIST + 1)))
    )
    return scoped(statement, viewer)


async def get_job(session: ReadSession, viewer: Viewer, job_id: str) -> Job:
    """The job, if ``viewer`` may see it; another workspace's job is not found."""
    job: Job | None = await session.scalar(scoped(select(Job).where(Job.id == job_id), viewer))
    if job is None:
        raise JobNotFound(f"No job {job_id!r}")
    return job


async def read_job(
    session: ReadSession, viewer: Viewer, job_id: str
) -> tuple[Job, list[HistoryEntry]]:
    job = await get_job(session, viewer, job_id)
    return job, history_of(job, await history.attempts_of(session, job.id))


async def revive(
    uow: UnitOfWork,
    queue: JobQueue,
    registry: JobRegistry,
    viewer: Viewer,
    job_id: str,
    *,
    actor: str,
    now: datetime,
    run_at: datetime | None = None,
) -> Job:
    """Retry (``run_at`` None: now) or requeue (at ``run_at``) a dead job; see the module doc."""
    if run_at is not None and not now - timedelta(minutes=5) <= run_at <= now + REQUEUE_HORIZON:
        raise ValidationFailed.field("run_at", "choose a time from now to a year from now")
    job = await _dead(uow, viewer, job_id)
    spec = registry.specs.get(job.name)
    if spec is None:
        raise JobNotDead(
            f"No job named {job.name!r} is registered in this process: it cannot run here",
            code="job_unknown",
        )
    at = max(now, run_at) if run_at is not None else now
    action = ACTION_RETRIED if run_at is None else ACTION_REQUEUED
    history.record_action(
        uow.session, now, job, action=action, actor=actor, note=f"to run at {at.isoformat()}"
    )
    await uow.session.flush()
    if not await queue.revive(uow, job, queue=spec.queue, max_tries=spec.max_tries, run_at=at):
        raise JobNotDead(f"Job {job_id!r} is no longer dead")
    return await _reloaded(uow, job.id)


async def discard(
    uow: UnitOfWork, viewer: Viewer, job_id: str, *, actor: str, now: datetime
) -> Job:
    """Mark a dead job ``discarded``: kept, with its history, never run again."""
    job = await _dead(uow, viewer, job_id)
    history.record_action(uow.session, now, job, action=ACTION_DISCARDED, actor=actor, note=None)
    # Conditional, so a discard racing a retry of the same job changes it once.
    result = await uow.session.execute(
        JOBS.transition(update(Job).where(Job.id == job.id), JOB_DISCARDED, from_=(JOB_DEAD,))
    )
    if not row_count(result):
        raise JobNotDead(f"Job {job_id!r} is no longer dead")
    return await _reloaded(uow, job.id)


async def _dead(uow: UnitOfWork, viewer: Viewer, job_id: str) -> Job:
    job = await get_job(uow.session, viewer, job_id)
    if job.status != JOB_DEAD:
        raise JobNotDead(
            f"Job {job_id!r} is {job.status}, not dead: only a dead job can be changed"
        )
    return job


async def _reloaded(uow: UnitOfWork, job_id: str) -> Job:
    job = await uow.session.get(Job, job_id, populate_existing=True)
    assert job is not None
    return job
