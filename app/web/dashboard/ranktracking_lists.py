"""Keyword list pages under ``/ui/ranktracking/lists``: every list of the workspace, making one,
a list's keywords, and adding to it (one a line, or the first column of a CSV)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect, Template

from app.engines.ranktracking import lists as list_service
from app.engines.ranktracking.keywords import parse_import
from app.errors import DomainError
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import page
from app.web.dashboard.ranktracking_forms import error_text
from app.web.deps import CurrentClock, Reads, Writes

PREFIX = "/ui/ranktracking"


class ListForm(msgspec.Struct, kw_only=True):
    name: str = ""
    keywords: str = ""
    format: str = "text"


@get(f"{PREFIX}/lists")
async def lists_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    items = await list_service.all_lists(session, principal.workspace_id)
    return page(request, "ranktracking/lists.html", principal, lists=items, errors=[])


@post(f"{PREFIX}/lists")
async def create_list(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: URLEncodedBody[ListForm],
) -> Template | Redirect:
    try:
        if not data.name.strip():
            raise DomainError("Name: a list needs a name")
        async with uow.attempt():
            kl, _ = await list_service.create_list(
                uow.session,
                workspace_id=principal.workspace_id,
                name=data.name,
                keywords=parse_import(data.keywords),
                now=clock.now(),
            )
    except DomainError as exc:
        items = await list_service.all_lists(uow.session, principal.workspace_id)
        tpl = page(
            request,
            "ranktracking/lists.html",
            principal,
            lists=items,
            errors=error_text(exc),
            form=data,
        )
        tpl.status_code = 422
        return tpl
    return Redirect(f"{PREFIX}/lists/{kl.id}")


@get(f"{PREFIX}/lists/{{list_id:int}}")
async def list_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    list_id: FromPath[int],
    notice: FromQuery[str | None] = None,
) -> Template:
    kl = await list_service.get_list(session, principal.workspace_id, list_id)
    detail = await list_service.detail_out(session, kl)
    return page(request, "ranktracking/list.html", principal, kl=detail, notice=notice)


@post(f"{PREFIX}/lists/{{list_id:int}}/keywords")
async def add_to_list(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    list_id: FromPath[int],
    data: URLEncodedBody[ListForm],
) -> Redirect:
    fmt = "csv" if data.format == "csv" else "text"
    try:
        async with uow.attempt():
            kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
            report = await list_service.add_keywords(
                uow.session, kl, parse_import(data.keywords, fmt=fmt), now=clock.now()
            )
        text = (
            f"Added {len(report.added)}; skipped {len(report.skipped_existing)} already in the list"
        )
        if report.skipped_duplicates:
            text += f" and {len(report.skipped_duplicates)} repeated"
    except DomainError as exc:
        text = exc.message
    return Redirect(f"{PREFIX}/lists/{list_id}?notice={quote(text)}")


ROUTES: list[Any] = [lists_page, create_list, list_page, add_to_list]
