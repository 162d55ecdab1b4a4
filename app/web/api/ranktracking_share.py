"""Shared report links of a schedule in the JSON API under
``/api/v1/ranktracking/schedules/{id}/share-links``: a workspace admin makes a link (valid 7, 30 or
90 days; its address is in the answer that made it and never again), lists them with their expiry
and state, and revokes one. Another workspace's schedule or link answers 404."""

from __future__ import annotations

from typing import Any

from litestar import delete, get, post
from litestar.params import JSONBody

from app.engines.ranktracking.reports import share
from app.engines.ranktracking.reports.share import ReportLinkIn, ReportLinkList, ReportLinkOut
from app.engines.ranktracking.schedules import lookup
from app.web.api.common import RowId
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_admin
from app.web.deps import CurrentClock, Reads, Writes

LINKS = "/schedules/{schedule_id:int}/share-links"


@post(LINKS)
async def create_report_link(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    data: JSONBody[ReportLinkIn],
) -> ReportLinkOut:
    """A read-only link to the schedule's positions and charts for someone without an account
    (workspace admins). ``url`` is shown in this answer only: only a hash of it is stored."""
    require_admin(principal)
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    now = clock.now()
    created = await share.create_link(
        uow.session, schedule, days=data.days, created_by=principal.user_id, now=now
    )
    base = runtime.settings.web.public_url.rstrip("/")
    return share.link_out(created.link, now, url=base + share.share_path(created.token))


@get(LINKS)
async def list_report_links(
    principal: CurrentPrincipal, session: Reads, clock: CurrentClock, schedule_id: RowId
) -> ReportLinkList:
    """The schedule's links, newest first, each with its expiry and state (never its address)."""
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    found = await share.list_links(session, schedule)
    return ReportLinkList(items=[share.link_out(link, clock.now()) for link in found])


@delete(f"{LINKS}/{{link_id:int}}")
async def revoke_report_link(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    link_id: RowId,
) -> None:
    """Revoke a link: it answers 404 from now on (the row stays, listed as ``revoked``)."""
    require_admin(principal)
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await share.revoke_link(uow.session, schedule, link_id, clock.now())


HANDLERS: list[Any] = [create_report_link, list_report_links, revoke_report_link]
