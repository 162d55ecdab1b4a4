"""Shared report links on the schedule page ("Share report": create a link valid 7, 30 or 90
days, shown once; the list with each link's expiry; revoke with a confirmation), and the public
page a link opens (RT-113..RT-118).

The public page answers without a session: the token in its address is its key. It sends
``Referrer-Policy: no-referrer`` (the token must not leak to a site the page links to) and
``X-Robots-Tag: noindex``; an unknown, expired or revoked token gets one and the same 404 page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.ranktracking.alerts.shared_page import shared_report
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.reports import share
from app.engines.ranktracking.schedules import lookup
from app.errors import DomainError, NotFound
from app.web.auth import CurrentPrincipal, require_admin
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Reads, Writes

PREFIX = "/ui/ranktracking/schedules/{schedule_id:int}/share"
SHARED = "/shared/ranktracking/{token:str}"
PAGE_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
    "Cache-Control": "no-store",
}
NOT_FOUND_PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Report not found</title>'
    "</head><body><main><h1>Report not found</h1><p>This report link is not valid: it may have "
    "expired or been revoked. Ask the person who sent it for a new one.</p></main></body></html>"
)


def public_url(request: Request[Any, Any, Any], token: str) -> str:
    base = request.app.state.runtime.settings.web.public_url.rstrip("/")
    return f"{base}{share.share_path(token)}"


async def share_context(session: ReadSession, schedule: Schedule, now: datetime) -> dict[str, Any]:
    """What the schedule page shows of its shared links."""
    if schedule.data_type != "serp":
        return {"share_links": []}
    found = await share.list_links(session, schedule)
    return {"share_links": [share.link_out(link, now) for link in found]}


class ShareForm(msgspec.Struct, kw_only=True):
    days: str = "30"


def _back(schedule_id: int, text: str) -> Redirect:
    return Redirect(f"/ui/ranktracking/schedules/{schedule_id}?notice={quote(text)}#rt-share")


@post(PREFIX)
async def create_share_link(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    data: URLEncodedBody[ShareForm],
) -> Template | Redirect:
    """Make a link and show it once, on a page of its own (it is never shown again)."""
    require_admin(principal)
    days = int(data.days) if data.days.isdigit() and len(data.days) < 4 else 0
    try:
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            created = await share.create_link(
                uow.session, schedule, days=days, created_by=principal.user_id, now=clock.now()
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return _back(schedule_id, exc.message)
    return page(
        request,
        "ranktracking/share_created.html",
        principal,
        schedule=schedule,
        link=share.link_out(created.link, clock.now()),
        url=public_url(request, created.token),
    )


@post(f"{PREFIX}/{{link_id:int}}/revoke")
async def revoke_share_link(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    link_id: FromPath[int],
) -> Redirect:
    require_admin(principal)
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await share.revoke_link(uow.session, schedule, link_id, clock.now())
    return _back(schedule_id, "Link revoked: it no longer opens the report")


@get(SHARED, cache=False)
async def shared_report_page(
    session: Reads, clock: CurrentClock, token: FromPath[str]
) -> Response[str]:
    """The report a shared link opens, read-only, for anyone holding the link."""
    now = clock.now()
    try:
        opened = await share.open_link(session, token, now)
    except NotFound:
        return Response(
            NOT_FOUND_PAGE,
            status_code=404,
            media_type="text/html; charset=utf-8",
            headers=PAGE_HEADERS,
        )
    html = await shared_report(session, opened.schedule, now)
    return Response(html, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


ROUTES: list[Any] = [create_share_link, revoke_share_link]
PUBLIC_ROUTES: list[Any] = [shared_report_page]
