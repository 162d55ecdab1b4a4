"""Keyword import into a list as a background job, from the list's page: upload a CSV file (the
keyword in the first column) or paste one keyword a line; the browser then goes to the job's
page (``/ui/jobs/{id}``), whose progress bar is the contact import's component, with the
per-entry report."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from litestar import post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect

from app.engines.ranktracking.keyword_import import start_keyword_import
from app.errors import DomainError
from app.web.auth import CurrentPrincipal
from app.web.dashboard.bulk_jobs_ui import JOBS
from app.web.deps import CurrentClock, Queue, Writes

LISTS = "/ui/ranktracking/lists"

MultipartForm = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.MULTI_PART)]


@post(f"{LISTS}/{{list_id:int}}/imports")
async def start_keyword_import_page(
    principal: CurrentPrincipal,
    uow: Writes,
    job_queue: Queue,
    clock: CurrentClock,
    list_id: FromPath[int],
    data: MultipartForm,
) -> Redirect:
    """The import job is enqueued once the request's transaction is committed."""
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
        async with uow.attempt():
            job = await start_keyword_import(
                uow,
                job_queue,
                workspace_id=principal.workspace_id,
                list_id=list_id,
                text=text,
                fmt=fmt,
                now=clock.now(),
            )
    except DomainError as exc:
        return Redirect(f"{LISTS}/{list_id}?notice={quote(exc.message)}")
    return Redirect(f"{JOBS}/{job.id}", status_code=303)


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [start_keyword_import_page]
PUBLIC_ROUTES: list[Any] = []
