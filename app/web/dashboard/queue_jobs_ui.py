"""Queue jobs on the dashboard: the dead (and discarded) jobs a person may see, and a page per
job with its history of attempts and the buttons that retry, requeue or discard it (forms with
the CSRF token, as every dashboard form). The same rule and operations as the API
(:mod:`app.web.job_access`, :mod:`app.scheduling.dead_jobs`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.errors import DomainError
from app.scheduling import dead_jobs
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.common import page
from app.web.deps import Queue, Reads, Writes
from app.web.job_access import actor_of, job_viewer

JOBS_PAGE = "/ui/queue/jobs"


class RequeueForm(msgspec.Struct):
    run_at: str = ""
    """``YYYY-MM-DDTHH:MM`` (UTC, as the page says); empty: now."""


def job_page_url(job_id: str) -> str:
    return f"{JOBS_PAGE}/{quote(job_id, safe='')}"


@get(JOBS_PAGE)
async def queue_jobs_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
) -> Template:
    """Dead jobs (``?status=discarded``: discarded ones), the latest to end first."""
    status = request.query_params.get("status", "dead")
    status = status if status in dead_jobs.LISTED_STATUSES else "dead"
    viewer = await job_viewer(session, principal, runtime.db, runtime.registry)
    jobs = await dead_jobs.list_jobs(session, viewer, status=status, limit=dead_jobs.MAX_LIST)
    return page(
        request,
        "queue/jobs.html",
        principal,
        jobs=jobs,
        status=status,
        operator=viewer.operator,
        job_url=job_page_url,
    )


async def _job_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: ReadSession,
    job_id: str,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> Template:
    viewer = await job_viewer(session, principal, runtime.db, runtime.registry)
    job, entries = await dead_jobs.read_job(session, viewer, job_id)
    tpl = page(
        request,
        "queue/job.html",
        principal,
        job=job,
        history=entries,
        error=error,
        action_url=job_page_url(job.id),
        now=runtime.clock.now(),
    )
    tpl.status_code = status_code
    return tpl


@get(f"{JOBS_PAGE}/{{job_id:str}}")
async def queue_job_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    job_id: FromPath[str],
) -> Template:
    return await _job_page(request, principal, runtime, session, job_id)


async def _act(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    uow: Writes,
    job_queue: Queue,
    job_id: str,
    action: str,
    run_at: datetime | None = None,
) -> Template | Redirect:
    viewer = await job_viewer(uow.session, principal, runtime.db, runtime.registry)
    now = runtime.clock.now()
    try:
        async with uow.attempt():
            if action == "discard":
                await dead_jobs.discard(uow, viewer, job_id, actor=actor_of(principal), now=now)
            else:
                await dead_jobs.revive(
                    uow,
                    job_queue,
                    runtime.registry,
                    viewer,
                    job_id,
                    actor=actor_of(principal),
                    now=now,
                    run_at=run_at,
                )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _job_page(
            request,
            principal,
            runtime,
            uow.session,
            job_id,
            error=exc.message,
            status_code=exc.status,
        )
    return Redirect(job_page_url(job_id))


@post(f"{JOBS_PAGE}/{{job_id:str}}/retry")
async def retry_job(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    uow: Writes,
    job_queue: Queue,
    job_id: FromPath[str],
) -> Template | Redirect:
    return await _act(request, principal, runtime, uow, job_queue, job_id, "retry")


@post(f"{JOBS_PAGE}/{{job_id:str}}/requeue")
async def requeue_job(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    uow: Writes,
    job_queue: Queue,
    job_id: FromPath[str],
    data: URLEncodedBody[RequeueForm],
) -> Template | Redirect:
    text = data.run_at.strip()
    if not text:
        at = runtime.clock.now()
    else:
        try:
            at = datetime.fromisoformat(text).replace(tzinfo=UTC)
        except ValueError:
            return await _job_page(
                request,
                principal,
                runtime,
                uow.session,
                job_id,
                error="Run at: a date and time such as 2026-12-31T09:30 (UTC), or empty for now.",
                status_code=422,
            )
    return await _act(request, principal, runtime, uow, job_queue, job_id, "requeue", at)


@post(f"{JOBS_PAGE}/{{job_id:str}}/discard")
async def discard_job(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    uow: Writes,
    job_queue: Queue,
    job_id: FromPath[str],
) -> Template | Redirect:
    return await _act(request, principal, runtime, uow, job_queue, job_id, "discard")


ROUTES = [queue_jobs_page, queue_job_page, retry_job, requeue_job, discard_job]
