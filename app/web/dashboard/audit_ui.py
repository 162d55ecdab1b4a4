"""The organisation's audit log in the browser, for its owners and admins: every entry of every
workspace and of the organisation itself, newest first, filtered, a page at a time, and as CSV."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get
from litestar.response import Template

from app.errors import ValidationFailed
from app.pagination import DEFAULT_PAGE_SIZE, cursor_number
from app.platform import audit
from app.platform.audit.query import AuditFilter, audit_filter, described, entries, entries_csv
from app.web.auth import CurrentPrincipal, require_organisation_manager
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Reads, Writes

AUDIT_PAGE = "/ui/organisation/audit"
_FIELDS = ("action", "actor", "object_type", "from", "to")


def _query(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {k: request.query_params.get(k, "")[:100] for k in _FIELDS}


def _filter(values: dict[str, str]) -> AuditFilter:
    return audit_filter(
        action=values["action"] or None,
        actor=values["actor"] or None,
        object_type=values["object_type"] or None,
        since=values["from"] or None,
        until=values["to"] or None,
    )


@get(AUDIT_PAGE)
async def audit_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    """Who did what, from where: the organisation's audit log."""
    require_organisation_manager(principal)
    values = _query(request)
    error = None
    rows = []
    next_query = None
    try:
        before = cursor_number(request.query_params.get("cursor"))
        rows = await entries(
            session,
            principal.organisation_id,
            _filter(values),
            limit=DEFAULT_PAGE_SIZE + 1,
            before_id=before,
        )
    except ValidationFailed as exc:
        error = exc.message
    if len(rows) > DEFAULT_PAGE_SIZE:
        rows = rows[:DEFAULT_PAGE_SIZE]
        next_query = urlencode({**values, "cursor": rows[-1].id})
    filled = {k: v for k, v in values.items() if v}
    tpl = page(
        request,
        "platform/audit.html",
        principal,
        entries=rows,
        values=values,
        error=error,
        next_query=next_query,
        csv_query=urlencode(filled),
    )
    tpl.status_code = 422 if error else 200
    return tpl


@get(f"{AUDIT_PAGE}.csv", media_type="text/csv")
async def audit_csv_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, uow: Writes, clock: CurrentClock
) -> Response[str]:
    """The filtered log as CSV; the export is itself recorded."""
    require_organisation_manager(principal)
    f = _filter(_query(request))
    text = await entries_csv(uow.session, principal.organisation_id, f)
    await audit.record(
        uow.session,
        action="audit.exported",
        object_type="audit_log",
        object_id="",
        organisation_id=principal.organisation_id,
        after=described(f),
        now=clock.now(),
    )
    return Response(
        text,
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="audit.csv"'},
    )


ROUTES = [audit_page, audit_csv_page]
