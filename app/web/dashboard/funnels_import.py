"""The contact import page under ``/ui/funnels/contacts/import``: upload a CSV (or paste it),
then watch the background job's progress bar (htmx polls the progress fragment until the job
ends) and read its per-row report: the job page of any bulk job (:mod:`.bulk_job_page`), kept
at this address under the import. Uses the same engine call and job status as the API."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT, start_import
from app.errors import DomainError
from app.platform.service import Principal
from app.scheduling.bulk import list_bulk_jobs
from app.settings import Settings
from app.web.auth import CurrentPrincipal
from app.web.dashboard.bulk_job_page import read_job_page
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, CurrentSettings, Queue, Reads, Writes

IMPORT = "/ui/funnels/contacts/import"

MultipartForm = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.MULTI_PART)]


@get(IMPORT)
async def import_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
) -> Template:
    return await _form(request, principal, session, settings)


async def _form(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    settings: Settings,
    **extra: Any,
) -> Template:
    recent = await list_bulk_jobs(
        session, principal.workspace_id, before=None, limit=10, kinds=[CONTACTS_IMPORT.name]
    )
    tpl = page(
        request,
        "funnels/import.html",
        principal,
        recent=recent,
        max_rows=settings.bulk.max_import_rows,
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


@post(IMPORT)
async def start_import_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    job_queue: Queue,
    clock: CurrentClock,
    settings: CurrentSettings,
    data: MultipartForm,
) -> Template | Redirect:
    """The import job is enqueued once the request's transaction is committed."""
    upload = data.get("file")
    text = str(data.get("csv") or "")
    if isinstance(upload, UploadFile):
        raw = await upload.read()
        if raw:
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                return await _form(
                    request,
                    principal,
                    uow.session,
                    settings,
                    error="file: the file is not UTF-8 text",
                )
    try:
        async with uow.attempt():
            job = await start_import(
                uow,
                job_queue,
                workspace_id=principal.workspace_id,
                text=text,
                columns=None,
                max_rows=settings.bulk.max_import_rows,
                now=clock.now(),
            )
    except DomainError as exc:
        return await _form(
            request, principal, uow.session, settings, error=exc.message, csv=text[:20_000]
        )
    return Redirect(f"{IMPORT}/{job.id}", status_code=303)


async def _job_context(session: ReadSession, workspace_id: int, job_id: int) -> dict[str, Any]:
    """The job page of a contact import, at this page's address (``/ui/jobs/{id}`` shows the
    same)."""
    return await read_job_page(
        session, workspace_id, job_id, url=f"{IMPORT}/{job_id}", kinds=(CONTACTS_IMPORT.name,)
    )


@get(f"{IMPORT}/{{job_id:int}}")
async def import_job_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    job_id: FromPath[int],
) -> Template:
    context = await _job_context(session, principal.workspace_id, job_id)
    return page(request, "jobs/job.html", principal, **context)


@get(f"{IMPORT}/{{job_id:int}}/progress")
async def import_job_progress(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    job_id: FromPath[int],
) -> Template:
    context = await _job_context(session, principal.workspace_id, job_id)
    return page(request, "_bulk_progress.html", principal, **context)


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [import_page, start_import_page, import_job_page, import_job_progress]
PUBLIC_ROUTES: list[Any] = []
