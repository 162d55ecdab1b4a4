"""Dashboard pages of campaigns: the list with each campaign's counters and the form that
creates one (its audience filled from the segment builder or a saved segment). A campaign's own
page is :mod:`.funnels_campaign_page`, what a person does there :mod:`.funnels_campaign_actions`;
with the ingestion pages (:mod:`.funnels_events_ui`) and the funnel simulator
(:mod:`.funnel_simulator`) they are registered here."""

from __future__ import annotations

from typing import Any

from litestar import Request, get, post
from litestar.params import FromQuery
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.funnels.campaigns.records.counters import counters
from app.engines.funnels.campaigns.service import create_campaign, list_campaigns
from app.errors import DomainError
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal, require_admin
from app.web.dashboard import (
    audiences,
    funnel_simulator,
    funnels_campaign_actions,
    funnels_campaign_page,
    funnels_events_ui,
)
from app.web.dashboard.common import error_message, page
from app.web.dashboard.funnels_campaign_form import (
    CAMPAIGN_LABELS,
    CAMPAIGNS,
    Form,
    campaign_data_of,
    predicate_json,
)
from app.web.deps import CurrentClock, Reads, Writes


@get(CAMPAIGNS)
async def campaigns_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    segment: FromQuery[str | None] = None,
    saved_segment: FromQuery[int | None] = None,
) -> Template:
    """Campaigns; ``segment`` (predicate JSON, from the segment builder) or ``saved_segment``
    (a saved segment's id) fills the new campaign's audience."""
    form = {"saved_segment": str(saved_segment)} if saved_segment else None
    return await _campaigns(request, principal, session, segment=segment, form=form)


async def _campaigns(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    *,
    segment: str | None = None,
    **extra: Any,
) -> Template:
    form = extra.get("form") or {}
    rows = await list_campaigns(session, principal.workspace_id, limit=100)
    listed = [(c, await counters(session, c.id)) for c in rows]
    options = await audiences.builder_options(session, principal.workspace_id)
    builder = {
        **options,
        "count_url": f"{audiences.SEGMENTS}/count",
        "initial": predicate_json(form.get("audience_predicate") or segment),
    }
    extra["form"] = form
    tpl = page(
        request,
        "funnels_campaigns/campaigns.html",
        principal,
        campaigns=listed,
        builder=builder,
        segments=options["segments"],
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


@post(CAMPAIGNS)
async def create_campaign_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: Form,
) -> Template | Redirect:
    require_admin(principal)
    try:
        campaign_data = campaign_data_of(data)
        async with uow.attempt():
            campaign = await create_campaign(
                uow.session, principal.workspace_id, campaign_data, clock.now()
            )
    except DomainError as exc:
        return await _campaigns(
            request, principal, uow.session, error=error_message(exc, CAMPAIGN_LABELS), form=data
        )
    return Redirect(f"{CAMPAIGNS}/{campaign.id}")


NAV: list[tuple[str, str]] = [
    (funnels_events_ui.EVENTS, "Events"),
    (funnels_events_ui.FORMS, "Forms"),
    (CAMPAIGNS, "Campaigns"),
]
ROUTES: list[Any] = [
    *funnels_events_ui.ROUTES,
    campaigns_page,
    create_campaign_page,
    *funnels_campaign_page.ROUTES,
    *funnels_campaign_actions.ROUTES,
    *funnel_simulator.ROUTES,
]
PUBLIC_ROUTES: list[Any] = []
