"""Keyword lists in the position-tracking JSON API under ``/api/v1/ranktracking/lists``: make,
read and rename a list, add or remove keywords, import them (at once, or as a background job for
a large import). Another workspace's list answers 404; creating a list and adding or importing
keywords accept an ``Idempotency-Key`` header."""

from __future__ import annotations

from typing import Any

from litestar import Response, get, patch, post
from litestar.params import JSONBody

from app.db.session import UnitOfWork
from app.engines.ranktracking import lists as list_service
from app.engines.ranktracking.keyword_import import start_keyword_import
from app.engines.ranktracking.keywords import parse_import
from app.engines.ranktracking.schemas import (
    BulkAddOut,
    KeywordImportIn,
    KeywordsIn,
    ListDetailOut,
    ListIn,
    ListOut,
    ListRename,
    ListWriteOut,
    RemovedOut,
)
from app.web.api.common import Once, RowId
from app.web.api.jobs import BulkJobOut, bulk_job_out
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Queue, Reads, Writes


@get("/lists")
async def get_lists(principal: CurrentPrincipal, session: Reads) -> list[ListOut]:
    return await list_service.all_lists(session, principal.workspace_id)


@post("/lists")
async def create_list(
    principal: CurrentPrincipal, once: Once, clock: CurrentClock, data: JSONBody[ListIn]
) -> Response[ListWriteOut]:
    async def action(uow: UnitOfWork) -> ListWriteOut:
        kl, report = await list_service.create_list(
            uow.session,
            workspace_id=principal.workspace_id,
            name=data.name,
            keywords=data.keywords,
            now=clock.now(),
        )
        return ListWriteOut(list=await list_service.list_out(uow.session, kl), report=report)

    return await once(action)


@get("/lists/{list_id:int}")
async def get_list(principal: CurrentPrincipal, session: Reads, list_id: RowId) -> ListDetailOut:
    kl = await list_service.get_list(session, principal.workspace_id, list_id)
    return await list_service.detail_out(session, kl)


@patch("/lists/{list_id:int}")
async def rename_list(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[ListRename],
) -> ListOut:
    kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
    await list_service.rename_list(uow.session, kl, data.name, clock.now())
    return await list_service.list_out(uow.session, kl)


@post("/lists/{list_id:int}/keywords")
async def add_keywords(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[KeywordsIn],
) -> Response[BulkAddOut]:
    async def action(uow: UnitOfWork) -> BulkAddOut:
        kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
        return await list_service.add_keywords(uow.session, kl, data.keywords, now=clock.now())

    return await once(action)


@post("/lists/{list_id:int}/keywords/remove")
async def remove_keywords(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[KeywordsIn],
) -> RemovedOut:
    kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
    return await list_service.remove_keywords(uow.session, kl, data.keywords, now=clock.now())


@post("/lists/{list_id:int}/import")
async def import_keywords(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[KeywordImportIn],
) -> Response[BulkAddOut]:
    """One keyword a line (``text``) or the first column of a CSV (``csv``)."""

    async def action(uow: UnitOfWork) -> BulkAddOut:
        kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
        return await list_service.add_keywords(
            uow.session, kl, parse_import(data.text, fmt=data.format), now=clock.now()
        )

    return await once(action)


@post("/lists/{list_id:int}/import-jobs", status_code=202)
async def import_keywords_in_background(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    job_queue: Queue,
    list_id: RowId,
    data: JSONBody[KeywordImportIn],
) -> Response[BulkJobOut]:
    """The same import as a background job, in bounded chunks: answers 202 with the job; poll
    its ``url`` for progress and the per-entry report. The list, an empty import and one larger
    than a list can hold are checked first (404/422, nothing written)."""

    async def action(uow: UnitOfWork) -> BulkJobOut:
        job = await start_keyword_import(
            uow,
            job_queue,
            workspace_id=principal.workspace_id,
            list_id=list_id,
            text=data.text,
            fmt=data.format,
            now=clock.now(),
        )
        return bulk_job_out(job, [])

    return await once(action, status_code=202)


HANDLERS: list[Any] = [
    get_lists,
    create_list,
    get_list,
    rename_list,
    add_keywords,
    remove_keywords,
    import_keywords,
    import_keywords_in_background,
]
