"""The contact import page under ``/ui/funnels/contacts/import``: upload a CSV (or paste it), map
each column to a contact attribute, a custom field (an existing one, or one created on the spot),
tags or lists, with guesses from the header and the first 10 rows shown (FN-78), then watch the
background job's progress bar (htmx polls the progress fragment until the job ends) and read its
per-row report: the job page of any bulk job (:mod:`.bulk_job_page`), kept at this address under
the import. Uses the same engine call and job status as the API."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from app.db.session import ReadSession, UnitOfWork
from app.engines.funnels import reads
from app.engines.funnels.contacts import column_mapping
from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT, SKIP, start_import
from app.engines.funnels.contacts.fields import define_field
from app.engines.funnels.contacts.segments import FIELD_TYPES
from app.errors import DomainError, ValidationFailed
from app.platform.service import Principal
from app.scheduling.bulk import list_bulk_jobs
from app.settings import Settings
from app.web.auth import CurrentPrincipal
from app.web.dashboard.bulk_job_page import read_job_page
from app.web.dashboard.common import error_message, page
from app.web.deps import CurrentClock, CurrentSettings, Queue, Reads, Writes

IMPORT = "/ui/funnels/contacts/import"

MultipartForm = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.MULTI_PART)]
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


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


NEW_FIELD = "__new__"
"""The mapping's choice "a new custom field" (its key and type are asked beside it)."""
MAPPING_LABELS = {"csv": "File", "columns": "Columns", "key": "New field key", "type": "Type"}


@post(IMPORT)
async def upload_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    data: MultipartForm,
) -> Template:
    """Step 2 after the upload: map the columns (nothing is written yet)."""
    upload = data.get("file")
    text = str(data.get("csv") or "")
    if isinstance(upload, UploadFile):
        raw = await upload.read()
        if raw:
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                return await _form(
                    request, principal, session, settings, error="File: the file is not UTF-8 text"
                )
    try:
        column_mapping.sample(text)
    except DomainError as exc:
        return await _form(
            request,
            principal,
            session,
            settings,
            error=error_message(exc, MAPPING_LABELS),
            csv=text[:20_000],
        )
    return await _mapping(request, principal, session, settings, text, chosen=None)


async def _mapping(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    settings: Settings,
    text: str,
    *,
    chosen: dict[str, str] | None,
    **extra: Any,
) -> Template:
    """The mapping step: per column its header, a choice of what it becomes (guessed from the
    header unless ``chosen``), and the file's first rows."""
    definitions = await reads.field_definitions(session, principal.workspace_id)
    fields = {d.key: d.type for d in definitions}
    labels = {d.key: d.label for d in definitions}
    shown = column_mapping.sample(text)
    guessed = column_mapping.guesses(shown.header, fields, labels)
    columns = [
        {
            "index": i,
            "header": name,
            "target": (chosen or {}).get(f"map_{i}", guessed[i]),
            "new_key": (chosen or {}).get(f"new_key_{i}") or column_mapping.field_key(name),
            "new_type": (chosen or {}).get(f"new_type_{i}", "text"),
        }
        for i, name in enumerate(shown.header)
    ]
    tpl = page(
        request,
        "funnels/import_map.html",
        principal,
        csv=text,
        columns=columns,
        rows=shown.rows,
        targets=column_mapping.targets_offered(fields),
        labels=labels,
        field_types=FIELD_TYPES,
        new_field=NEW_FIELD,
        max_rows=settings.bulk.max_import_rows,
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


class MappingRefused(ValidationFailed):
    pass


async def _columns(
    uow: UnitOfWork, workspace_id: int, header: list[str], data: Form
) -> dict[str, str]:
    """The mapping the form chose, header → target; new custom fields are created here, in the
    import's transaction (refused together with it)."""
    columns: dict[str, str] = {}
    for i, name in enumerate(header):
        target = data.get(f"map_{i}", SKIP)
        if target == NEW_FIELD:
            key = (data.get(f"new_key_{i}") or "").strip() or column_mapping.field_key(name)
            try:
                await define_field(
                    uow.session, workspace_id, key, data.get(f"new_type_{i}", "text"), name
                )
            except ValidationFailed as exc:
                raise MappingRefused(
                    f"Column {name!r}: new field: {exc.details[0]['message']}"
                ) from None
            target = key
        columns[name] = target
    return columns


@post(f"{IMPORT}/mapped")
async def start_import_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    job_queue: Queue,
    clock: CurrentClock,
    settings: CurrentSettings,
    data: Form,
) -> Template | Redirect:
    """Import with the chosen mapping; the job is enqueued once the request's transaction is
    committed (with any custom field created for it)."""
    text = data.get("csv", "")
    try:
        header = column_mapping.sample(text).header
        async with uow.attempt():
            columns = await _columns(uow, principal.workspace_id, header, data)
            job = await start_import(
                uow,
                job_queue,
                workspace_id=principal.workspace_id,
                text=text,
                columns=columns,
                max_rows=settings.bulk.max_import_rows,
                now=clock.now(),
            )
    except DomainError as exc:
        message = exc.message if isinstance(exc, MappingRefused) else _plain(exc)
        if not text.strip():
            return await _form(request, principal, uow.session, settings, error=message)
        return await _mapping(
            request, principal, uow.session, settings, text, chosen=data, error=message
        )
    return Redirect(f"{IMPORT}/{job.id}", status_code=303)


def _plain(exc: DomainError) -> str:
    """The import's refusal in the mapping's words (``columns.X`` is the column ``X``)."""
    field = str(exc.details[0].get("field", "")) if exc.details else ""
    message = str(exc.details[0].get("message", exc.message)) if exc.details else exc.message
    if field.startswith("columns."):
        return f"Column {field.removeprefix('columns.')!r}: {message}"
    if "unknown columns" in message:
        return (
            "Some columns are not mapped to a contact field: "
            + message.split(": ", 1)[1].split(" (")[0]
            + ". Choose what each becomes, or leave it out."
        )
    return error_message(exc, MAPPING_LABELS)


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
ROUTES: list[Any] = [
    import_page,
    upload_page,
    start_import_page,
    import_job_page,
    import_job_progress,
]
PUBLIC_ROUTES: list[Any] = []
