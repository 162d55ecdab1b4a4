"""The hint on a dashboard page's 404: a link into another of the person's workspaces (a funnel,
a schedule, a rule … of that workspace) says which workspace holds it and offers the switch.

The 404 page itself is rendered by the error handler, which cannot read the database; it asks
for this hint with htmx. Tenancy: a workspace is named only when the person is a member of it;
an object of a workspace they do not belong to reads exactly like an object that does not exist.
"""

from __future__ import annotations

import re
from typing import Any

from litestar import Request, get
from litestar.params import FromQuery
from litestar.response import Template
from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute

from app.db.session import ReadSession
from app.engines.adrules.models import Rule
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.models import Contact, Funnel
from app.engines.funnels.models import Run as FunnelRun
from app.engines.ranktracking.models import KeywordList, Schedule
from app.platform.models import Membership, Workspace
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import page
from app.web.deps import Reads

HINT_PAGE = "/ui/workspace/partials/hint"

# The dashboard's object pages, by the path that names the object (the first match wins), and
# the column holding the object's workspace.
_OWNERS: list[tuple[re.Pattern[str], Any, InstrumentedAttribute[int]]] = [
    (re.compile(r"/ui/funnels/runs/(\d+)(?:/|$)"), FunnelRun, FunnelRun.workspace_id),
    (re.compile(r"/ui/funnels/contacts/(\d+)(?:/|$)"), Contact, Contact.workspace_id),
    (re.compile(r"/ui/funnels/campaigns/(\d+)(?:/|$)"), Campaign, Campaign.workspace_id),
    (re.compile(r"/ui/funnels/(\d+)(?:/|$)"), Funnel, Funnel.workspace_id),
    (re.compile(r"/ui/ranktracking/schedules/(\d+)(?:/|$)"), Schedule, Schedule.workspace_id),
    (re.compile(r"/ui/ranktracking/lists/(\d+)(?:/|$)"), KeywordList, KeywordList.workspace_id),
    (re.compile(r"/ui/adrules/rules/(\d+)(?:/|$)"), Rule, Rule.workspace_id),
]
_MAX_ID = 2**63 - 1


async def _owner_of(session: ReadSession, path: str) -> int | None:
    """The workspace holding the object the path names; None for a path naming none."""
    for pattern, model, column in _OWNERS:
        if (m := pattern.match(path)) is None:
            continue
        object_id = int(m.group(1))
        if object_id > _MAX_ID:
            return None
        owner: int | None = await session.scalar(select(column).where(model.id == object_id))
        return owner
    return None


async def members_workspace_holding(
    session: ReadSession, principal: Principal, path: str
) -> tuple[int, str] | None:
    """``(id, name)`` of the person's other workspace that holds the object of ``path``; None
    when the object is unknown, in the current workspace, or in a workspace they are not a
    member of (its name is never read then)."""
    if principal.user_id is None:
        return None
    owner = await _owner_of(session, path)
    if owner is None or owner == principal.workspace_id:
        return None
    row = (
        await session.execute(
            select(Workspace.id, Workspace.name)
            .join(Membership, Membership.workspace_id == Workspace.id)
            .where(Workspace.id == owner, Membership.user_id == principal.user_id)
        )
    ).first()
    return None if row is None else (int(row[0]), str(row[1]))


def _same_site(path: str) -> str:
    """Only a dashboard path is looked at (and offered as where the switch lands)."""
    return path if path.startswith("/ui/") and not path.startswith("/ui//") else ""


@get(HINT_PAGE)
async def workspace_hint(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    path: FromQuery[str] = "",
) -> Template:
    """The fragment the 404 page loads: the switch into the workspace holding the object, or
    the plain "not found in this workspace"."""
    target = _same_site(path[:2000])
    holder = await members_workspace_holding(session, principal, target) if target else None
    return page(
        request,
        "platform/_workspace_hint.html",
        principal,
        holder=holder,
        target=target,
    )


ROUTES = [workspace_hint]
