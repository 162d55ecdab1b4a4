"""Queue jobs in the API: dead jobs with their history of attempts, and the operations on them
(retry, requeue, discard), under ``/api/v1/queue/jobs``. Scoped by :mod:`app.web.job_access`:
the workspace's admins and keys see its jobs, the instance's operators every job; another
workspace's job answers 404."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from litestar import Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody

from app.db.session import UnitOfWork
from app.pagination import Page
from app.scheduling import dead_jobs
from app.scheduling.dead_jobs import HistoryEntry
from app.scheduling.models import Job
from app.schemas import Schema
from app.web.api.common import Once, api_router
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import Paging, Queue, Reads
from app.web.job_access import actor_of, job_viewer

JobId = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]


class AttemptOut(Schema):
    attempt: int
    """The try's number (1 for the first; back to 1 after a retry); 0 for a person's action."""
    outcome: str
    """``failed``, ``dead``, ``lost`` (its worker stopped), ``done``, ``running``; or the actions
    ``retried``, ``requeued``, ``discarded``."""
    at: datetime | None
    worker: str | None
    """Where the attempt ran (host:pid:worker), or who acted (``user:<id>``, ``api_key:<id>``)."""
    error: str | None


class QueueJobOut(Schema):
    id: str
    """The job's id, which is also its idempotency key: a retried job keeps it."""
    name: str
    status: str
    """``queued``, ``running``, ``done``, ``dead`` or ``discarded``."""
    attempts: int
    max_tries: int
    run_at: datetime
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None
    workspace_id: int | None
    """None: a platform job (the instance's operators see it)."""
    url: str


class QueueJobDetailOut(QueueJobOut, kw_only=True):
    history: list[AttemptOut]


class RequeueIn(Schema):
    run_at: datetime | None = None
    """When to run (UTC, from now to a year ahead); none: now."""


def _out(job: Job) -> QueueJobOut:
    return QueueJobOut(
        id=job.id,
        name=job.name,
        status=job.status,
        attempts=job.attempts,
        max_tries=job.max_tries,
        run_at=job.run_at,
        created_at=job.created_at,
        finished_at=job.finished_at,
        last_error=job.last_error,
        workspace_id=job.workspace_id,
        url=f"/api/v1/queue/jobs/{job.id}",
    )


def _detail(job: Job, entries: list[HistoryEntry]) -> QueueJobDetailOut:
    base = msgspec.structs.asdict(_out(job))
    return QueueJobDetailOut(
        **base,
        history=[AttemptOut(e.attempt, e.outcome, e.at, e.worker, e.error) for e in entries],
    )


@get("/jobs")
async def list_queue_jobs(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    paging: Paging,
    status: FromQuery[Literal["dead", "discarded"]] = "dead",
) -> Page[QueueJobOut]:
    """Dead (or discarded) jobs, the latest to end first (the cursor is the next page's
    offset)."""
    viewer = await job_viewer(session, principal, runtime.db, runtime.registry)
    offset = paging.after or 0
    jobs = await dead_jobs.list_jobs(
        session, viewer, status=status, limit=paging.fetch, offset=offset
    )
    more = len(jobs) > paging.limit
    return Page(
        items=[_out(job) for job in jobs[: paging.limit]],
        next_cursor=str(offset + paging.limit) if more else None,
    )


@get("/jobs/{job_id:str}")
async def get_queue_job(
    principal: CurrentPrincipal, runtime: CurrentRuntime, session: Reads, job_id: FromPath[JobId]
) -> QueueJobDetailOut:
    """The job with its history: every attempt that ended (when, where, outcome, error) and
    every action taken on it."""
    viewer = await job_viewer(session, principal, runtime.db, runtime.registry)
    job, entries = await dead_jobs.read_job(session, viewer, job_id)
    return _detail(job, entries)


async def _revive(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    job_queue: Queue,
    once: Once,
    job_id: str,
    run_at: datetime | None,
) -> Response[QueueJobDetailOut]:
    viewer = await job_viewer(session, principal, runtime.db, runtime.registry)

    async def action(uow: UnitOfWork) -> QueueJobDetailOut:
        job = await dead_jobs.revive(
            uow,
            job_queue,
            runtime.registry,
            viewer,
            job_id,
            actor=actor_of(principal),
            now=runtime.clock.now(),
            run_at=run_at,
        )
        return _detail(job, (await dead_jobs.read_job(uow.session, viewer, job.id))[1])

    return await once(action, status_code=200)


@post("/jobs/{job_id:str}/retry")
async def retry_queue_job(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    job_queue: Queue,
    once: Once,
    job_id: FromPath[JobId],
) -> Response[QueueJobDetailOut]:
    """Run a dead job again now, its tries counted afresh, under the same id (409 when it is not
    dead)."""
    return await _revive(principal, runtime, session, job_queue, once, job_id, None)


@post("/jobs/{job_id:str}/requeue")
async def requeue_queue_job(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    job_queue: Queue,
    once: Once,
    job_id: FromPath[JobId],
    data: JSONBody[RequeueIn],
) -> Response[QueueJobDetailOut]:
    """Put a dead job back in the queue to run at ``run_at`` (or now), its tries counted afresh."""
    at = data.run_at or runtime.clock.now()
    return await _revive(principal, runtime, session, job_queue, once, job_id, at)


@post("/jobs/{job_id:str}/discard")
async def discard_queue_job(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    once: Once,
    job_id: FromPath[JobId],
) -> Response[QueueJobDetailOut]:
    """Give up on a dead job: ``discarded``, kept with its history, never run again."""
    viewer = await job_viewer(session, principal, runtime.db, runtime.registry)

    async def action(uow: UnitOfWork) -> QueueJobDetailOut:
        job = await dead_jobs.discard(
            uow, viewer, job_id, actor=actor_of(principal), now=runtime.clock.now()
        )
        return _detail(job, (await dead_jobs.read_job(uow.session, viewer, job.id))[1])

    return await once(action, status_code=200)


ROUTERS = [
    api_router(
        "/queue",
        [list_queue_jobs, get_queue_job, retry_queue_job, requeue_queue_job, discard_queue_job],
        tag="queue",
    )
]
