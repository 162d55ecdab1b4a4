"""The audit log over the API: who did what, from where, newest first, filtered, paged or as CSV.

A workspace API key reads the entries of its own workspace (keys are created by the workspace's
admins and act as one); the whole organisation's log, organisation-level actions included, is on
the dashboard for its owners and admins (``/ui/organisation/audit``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from litestar import Response, get
from litestar.params import QueryParameter

from app.pagination import Page, page_of
from app.platform import audit
from app.platform.audit.models import AuditEntry
from app.platform.audit.query import (
    AuditFilter,
    audit_filter,
    described,
    entries,
    entries_csv,
)
from app.schemas import Schema
from app.web.api.common import api_router
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Paging, Reads, Writes

# What app.platform.audit.query.audit_filter accepts, stated in the document.
_WHEN = (
    r"^\s*(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])"
    r"(T([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,6})?)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))?)?\s*$"
)
"""Nothing, a date, or a time with its offset. The pattern states the days every month has (1 to
28); the 29th to the 31st are accepted too where the month has them."""

ActionQuery = Annotated[
    str | None,
    QueryParameter(
        description="An action (``api_key.created``) or a family (``api_key.*``).",
        schema_extra={"maxLength": 64},
    ),
]
ActorQuery = Annotated[
    str | None,
    QueryParameter(
        description="``user:<id>``, ``api_key:<id>``, ``system`` or ``anonymous``.",
        schema_extra={"pattern": "^((user|api_key)(:[0-9]{1,18})?|system|anonymous)?$"},
    ),
]
ObjectTypeQuery = Annotated[
    str | None,
    QueryParameter(description="``api_key``, ``secret``, …", schema_extra={"maxLength": 64}),
]
FromQuery = Annotated[
    str | None,
    QueryParameter(
        name="from",
        description="From this time (ISO 8601 with offset, or a date).",
        schema_extra={"pattern": _WHEN},
    ),
]
ToQuery = Annotated[
    str | None,
    QueryParameter(
        name="to",
        description="Before this time (exclusive); later than ``from``.",
        schema_extra={"pattern": _WHEN},
    ),
]


class AuditEntryOut(Schema):
    id: int
    at: datetime
    action: str
    object_type: str
    object_id: str
    workspace_id: int | None
    actor_kind: str
    user_id: int | None
    api_key_id: int | None
    client_address: str
    user_agent: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def entry_out(entry: AuditEntry) -> AuditEntryOut:
    return AuditEntryOut(
        id=entry.id,
        at=entry.at,
        action=entry.action,
        object_type=entry.object_type,
        object_id=entry.object_id,
        workspace_id=entry.workspace_id,
        actor_kind=entry.actor_kind,
        user_id=entry.user_id,
        api_key_id=entry.api_key_id,
        client_address=entry.client_address,
        user_agent=entry.user_agent,
        before=entry.before,
        after=entry.after,
    )


def csv_download(text: str, filename: str) -> Response[str]:
    return Response(
        text,
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _filter(
    principal: Any,
    action: str | None,
    actor: str | None,
    object_type: str | None,
    since: str | None,
    until: str | None,
) -> AuditFilter:
    return audit_filter(
        action=action,
        actor=actor,
        object_type=object_type,
        since=since,
        until=until,
        workspace_id=principal.workspace_id,
    )


@get("/audit")
async def list_audit(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    action: ActionQuery = None,
    actor: ActorQuery = None,
    object_type: ObjectTypeQuery = None,
    since: FromQuery = None,
    until: ToQuery = None,
) -> Page[AuditEntryOut]:
    """The key's workspace's audit entries, newest first."""
    f = _filter(principal, action, actor, object_type, since, until)
    rows = await entries(
        session, principal.organisation_id, f, limit=paging.fetch, before_id=paging.after
    )
    return page_of([entry_out(r) for r in rows], paging.limit)


@get("/audit.csv", media_type="text/csv")
async def audit_csv(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    action: ActionQuery = None,
    actor: ActorQuery = None,
    object_type: ObjectTypeQuery = None,
    since: FromQuery = None,
    until: ToQuery = None,
) -> Response[str]:
    """Every matching entry as CSV (the export is itself recorded)."""
    f = _filter(principal, action, actor, object_type, since, until)
    text = await entries_csv(uow.session, principal.organisation_id, f)
    await audit.record(
        uow.session,
        action="audit.exported",
        object_type="audit_log",
        object_id="",
        workspace_id=principal.workspace_id,
        organisation_id=principal.organisation_id,
        after=described(f),
        now=clock.now(),
    )
    return csv_download(text, "audit.csv")


ROUTERS = [api_router("", [list_audit, audit_csv], tag="audit")]
