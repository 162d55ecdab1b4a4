"""The contact import page under ``/ui/funnels/contacts/import``: upload a CSV (or paste it),
then watch the background job's progress bar (htmx polls the progress fragment until the job
ends) and read its per-row report. Uses the same engine call and job status as the API."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT, start_import
from app.errors import DomainError
from app.runtime import Runtime
from app.scheduling.bulk import list_bulk_jobs
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.bulk_progress import ProgressView, progress_context
from app.web.dashboard.common import page

IMPORT = "/ui/funnels/contacts/import"

MultipartForm = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.MULTI_PART)]


@get(IMPORT)
async def import_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    return await _form(request, principal, runtime)


async def _form(
    request: Request[Any, Any, Any], principal: Any, runtime: Runtime, **extra: Any
) -> Template:
    async with runtime.db.read() as session:
        recent = await list_bulk_jobs(
            session, principal.workspace_id, before=None, limit=10, kinds=[CONTACTS_IMPORT.name]
        )
    tpl = page(
        request,
        "funnels/import.html",
        principal,
        recent=recent,
        max_rows=runtime.settings.bulk.max_import_rows,
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


@post(IMPORT)
async def start_import_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: MultipartForm,
) -> Template | Redirect:
    upload = data.get("file")
    text = str(data.get("csv") or "")
    if isinstance(upload, UploadFile):
        raw = await upload.read()
        if raw:
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                return await _form(
                    request, principal, runtime, error="file: the file is not UTF-8 text"
                )
    try:
        async with runtime.db.write() as uow:
            job = await start_import(
                uow,
                runtime.queue,
                workspace_id=principal.workspace_id,
                text=text,
                columns=None,
                max_rows=runtime.settings.bulk.max_import_rows,
                now=runtime.clock.now(),
            )
    except DomainError as exc:
        return await _form(request, principal, runtime, error=exc.message, csv=text[:20_000])
    return Redirect(f"{IMPORT}/{job.id}", status_code=303)


async def _job_context(runtime: Runtime, workspace_id: int, job_id: int) -> dict[str, Any]:
    view = ProgressView(
        title="Import",
        poll_url=f"{IMPORT}/{job_id}/progress",
        counters=(("created", "Created"), ("updated", "Updated")),
    )
    return await progress_context(
        runtime, workspace_id, job_id, kinds=(CONTACTS_IMPORT.name,), view=view
    )


@get(f"{IMPORT}/{{job_id:int}}")
async def import_job_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    job_id: FromPath[int],
) -> Template:
    context = await _job_context(runtime, principal.workspace_id, job_id)
    return page(request, "funnels/import_job.html", principal, **context)


@get(f"{IMPORT}/{{job_id:int}}/progress")
async def import_job_progress(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    job_id: FromPath[int],
) -> Template:
    context = await _job_context(runtime, principal.workspace_id, job_id)
    return page(request, "funnels/_import_progress.html", principal, **context)


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [import_page, start_import_page, import_job_page, import_job_progress]
PUBLIC_ROUTES: list[Any] = []
