"""The dashboard page of any bulk job, ``/ui/jobs/{id}``, and its progress fragment, polled while
the job runs (:mod:`.bulk_job_page`). Pages that start a bulk job (the keyword import of a list)
send the browser here; the API serves the same status under ``/api/v1/jobs/{id}``."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.params import FromPath
from litestar.response import Template

from app.web.auth import CurrentPrincipal
from app.web.dashboard.bulk_job_page import read_job_page
from app.web.dashboard.common import page
from app.web.deps import Reads

JOBS = "/ui/jobs"


@get(f"{JOBS}/{{job_id:int}}")
async def job_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    job_id: FromPath[int],
) -> Template:
    context = await read_job_page(session, principal.workspace_id, job_id, url=f"{JOBS}/{job_id}")
    return page(request, "jobs/job.html", principal, **context)


@get(f"{JOBS}/{{job_id:int}}/progress")
async def job_progress(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    job_id: FromPath[int],
) -> Template:
    context = await read_job_page(session, principal.workspace_id, job_id, url=f"{JOBS}/{job_id}")
    return page(request, "_bulk_progress.html", principal, **context)


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [job_page, job_progress]
PUBLIC_ROUTES: list[Any] = []
