"""Keyword import into a list as a background job, from the list's page: upload a CSV file (the
keyword in the first column) or paste one keyword a line, then watch the job's progress bar (the
same component as the contact import's) and read its per-entry report."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from litestar import Request, get, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from app.engines.ranktracking import lists as list_service
from app.engines.ranktracking.keyword_import import KEYWORDS_IMPORT, start_keyword_import
from app.errors import DomainError
from app.runtime import Runtime
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.bulk_progress import ProgressView, progress_context
from app.web.dashboard.common import page

LISTS = "/ui/ranktracking/lists"

MultipartForm = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.MULTI_PART)]


def _job_url(list_id: int, job_id: int) -> str:
    return f"{LISTS}/{list_id}/imports/{job_id}"


@post(f"{LISTS}/{{list_id:int}}/imports")
async def start_keyword_import_page(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    list_id: FromPath[int],
    data: MultipartForm,
) -> Redirect:
    upload = data.get("file")
    text = str(data.get("keywords") or "")
    fmt = "csv" if data.get("format") == "csv" else "text"
    try:
        if isinstance(upload, UploadFile):
            raw = await upload.read()
            if raw:
                try:
                    text = raw.decode("utf-8-sig")
                except UnicodeDecodeError:
                    raise DomainError("File: the file is not UTF-8 text") from None
                fmt = "csv"  # an uploaded file is a CSV whose first column is the keyword
        async with runtime.db.write() as uow:
            job = await start_keyword_import(
                uow,
                runtime.queue,
                workspace_id=principal.workspace_id,
                list_id=list_id,
                text=text,
                fmt=fmt,
                now=runtime.clock.now(),
            )
    except DomainError as exc:
        return Redirect(f"{LISTS}/{list_id}?notice={quote(exc.message)}")
    return Redirect(_job_url(list_id, job.id), status_code=303)


async def _job_context(
    runtime: Runtime, workspace_id: int, list_id: int, job_id: int
) -> dict[str, Any]:
    view = ProgressView(
        title="Keyword import",
        poll_url=f"{_job_url(list_id, job_id)}/progress",
        items="keywords",
        item="Entry",
        counters=(("added", "Added"), ("skipped", "Already in the list")),
    )
    context = await progress_context(
        runtime, workspace_id, job_id, kinds=(KEYWORDS_IMPORT.name,), view=view
    )
    async with runtime.db.read() as session:
        context["kl"] = await list_service.get_list(session, workspace_id, list_id)
    return context


@get(f"{LISTS}/{{list_id:int}}/imports/{{job_id:int}}")
async def keyword_import_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    list_id: FromPath[int],
    job_id: FromPath[int],
) -> Template:
    context = await _job_context(runtime, principal.workspace_id, list_id, job_id)
    return page(request, "ranktracking/import_job.html", principal, **context)


@get(f"{LISTS}/{{list_id:int}}/imports/{{job_id:int}}/progress")
async def keyword_import_progress(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    list_id: FromPath[int],
    job_id: FromPath[int],
) -> Template:
    context = await _job_context(runtime, principal.workspace_id, list_id, job_id)
    return page(request, "_bulk_progress.html", principal, **context)


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [start_keyword_import_page, keyword_import_page, keyword_import_progress]
PUBLIC_ROUTES: list[Any] = []
