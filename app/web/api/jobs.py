"""Bulk jobs in the API: status, progress and the per-item report of imports and other bulk work,
scoped to the API key's workspace (another workspace's job answers 404)."""

from __future__ import annotations

from datetime import datetime

from litestar import get, post
from litestar.params import FromPath, FromQuery

from app.pagination import Page, page_of
from app.scheduling.bulk import (
    cancel_bulk_job,
    errors_of,
    get_bulk_job,
    list_bulk_jobs,
    progress,
)
from app.scheduling.bulk_models import BulkJob, BulkJobError
from app.schemas import Schema
from app.web.api.common import api_router
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Paging, Reads, Writes

REPORT_PREVIEW = 100
"""Refused items shown in a job's status; the whole report pages through ``/errors``."""


class ItemErrorOut(Schema):
    id: int
    item: int
    """The refused item: for an import, its row number in the file (the header is row 1)."""
    field: str
    message: str


class BulkJobOut(Schema):
    id: int
    kind: str
    status: str
    """``queued``, ``running``, ``done``, ``failed`` or ``cancelled``."""
    total: int | None
    """Items to process (rows of an import), when known."""
    processed: int
    progress: float
    """Share done, 0 to 1."""
    counters: dict[str, int]
    """What was done so far, by kind (an import: ``created``, ``updated``, ``failed``)."""
    error_count: int
    errors: list[ItemErrorOut]
    """The first refused items (see ``/api/v1/jobs/{id}/errors`` for all)."""
    last_error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str


def item_error_out(e: BulkJobError) -> ItemErrorOut:
    return ItemErrorOut(id=e.id, item=e.item, field=e.field, message=e.message)


def job_url(job: BulkJob | None) -> str | None:
    """Where a bulk job's status is read (``None`` for no job)."""
    return None if job is None else f"/api/v1/jobs/{job.id}"


def bulk_job_out(job: BulkJob, errors: list[BulkJobError]) -> BulkJobOut:
    return BulkJobOut(
        id=job.id,
        kind=job.kind,
        status=job.status,
        total=job.total,
        processed=job.processed,
        progress=round(progress(job), 4),
        counters=dict(job.counters or {}),
        error_count=job.error_count,
        errors=[item_error_out(e) for e in errors],
        last_error=job.last_error,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        url=f"/api/v1/jobs/{job.id}",
    )


@get("/")
async def list_jobs(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    kind: FromQuery[str | None] = None,
) -> Page[BulkJobOut]:
    """The workspace's bulk jobs, newest first."""
    jobs = await list_bulk_jobs(
        session,
        principal.workspace_id,
        before=paging.after,
        limit=paging.fetch,
        kinds=[kind] if kind else None,
    )
    return page_of([bulk_job_out(j, []) for j in jobs], paging.limit)


@get("/{job_id:int}")
async def show_job(
    principal: CurrentPrincipal, session: Reads, job_id: FromPath[int]
) -> BulkJobOut:
    """Status and progress; poll it while ``status`` is ``queued`` or ``running``."""
    job = await get_bulk_job(session, principal.workspace_id, job_id)
    errors = await errors_of(session, job.id, after=None, limit=REPORT_PREVIEW)
    return bulk_job_out(job, errors)


@get("/{job_id:int}/errors")
async def job_errors(
    principal: CurrentPrincipal, session: Reads, job_id: FromPath[int], paging: Paging
) -> Page[ItemErrorOut]:
    """The whole per-item report, in item order."""
    job = await get_bulk_job(session, principal.workspace_id, job_id)
    rows = await errors_of(session, job.id, after=paging.after, limit=paging.fetch)
    return page_of([item_error_out(e) for e in rows], paging.limit)


@post("/{job_id:int}/cancel", status_code=200)
async def cancel_job(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, job_id: FromPath[int]
) -> BulkJobOut:
    """Stop after the chunk in progress; what earlier chunks applied stays applied."""
    job = await cancel_bulk_job(uow.session, principal.workspace_id, job_id, clock.now())
    errors = await errors_of(uow.session, job.id, after=None, limit=REPORT_PREVIEW)
    return bulk_job_out(job, errors)


ROUTERS = [api_router("/jobs", [list_jobs, show_job, job_errors, cancel_job], tag="jobs")]
