"""Dashboard pages of ingestion and campaigns: the event stream, hosted forms and the site
snippet, campaigns (create, schedule, progress and counters), and a funnel's simulator."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Request, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, FromQuery
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession
from app.engines.funnels import reads
from app.engines.funnels.campaigns.audience import AUDIENCE
from app.engines.funnels.campaigns.service import (
    CampaignData,
    cancel_campaign,
    counters,
    create_campaign,
    get_campaign,
    list_campaigns,
    progress,
    schedule_campaign,
)
from app.engines.funnels.contacts.store import find_by_email
from app.engines.funnels.definitions.service import get_funnel
from app.engines.funnels.definitions.simulate import simulate
from app.engines.funnels.events.forms import FormField, create_form, embed_code, list_forms
from app.engines.funnels.events.site_snippet import snippet_tag
from app.engines.funnels.events.tracking import site_key
from app.errors import DomainError
from app.platform.crypto import SecretBox
from app.platform.service import Principal, get_workspace, webhook_secret
from app.settings import Settings
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_admin
from app.web.dashboard import activity, audiences
from app.web.dashboard.bulk_progress import ProgressView, read_progress
from app.web.dashboard.common import error_message, page
from app.web.deps import CurrentClock, CurrentSettings, Reads, Secrets, Writes

Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]

EVENTS = "/ui/funnels/events"
FORMS = "/ui/funnels/forms"
CAMPAIGNS = "/ui/funnels/campaigns"
# The forms' labels, so an error names the field a person sees.
FORM_LABELS = {
    "name": "Name",
    "fields": "Fields",
    "add_tag": "Tag submitters",
    "add_list": "Add to list",
}
CAMPAIGN_LABELS = {
    "name": "Name",
    "subject": "Subject",
    "body": "Text",
    "html": "HTML",
    "audience": "Audience",
    "rate_per_minute": "Messages per minute",
    "send_at": "Send at",
}


@get(EVENTS)
async def events_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    return page(
        request,
        "funnels_campaigns/events.html",
        principal,
        **await _events(session, principal.workspace_id),
    )


@get(f"{EVENTS}/stream")
async def events_stream(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    """The table part, refreshed by htmx every few seconds."""
    return page(
        request,
        "funnels_campaigns/_events.html",
        principal,
        **await _events(session, principal.workspace_id),
    )


async def _events(session: ReadSession, workspace_id: int) -> dict[str, Any]:
    return {
        "events": await reads.contact_events_with_email(session, workspace_id, limit=100),
        "inbound": await reads.inbound_events(session, workspace_id, before=None, limit=50),
    }


@get(FORMS)
async def forms_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    secrets: Secrets,
) -> Template:
    return await _forms(request, principal, session, settings, secrets)


async def _forms(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    settings: Settings,
    secrets: SecretBox,
    **extra: Any,
) -> Template:
    base = settings.web.public_url
    forms = await list_forms(session, principal.workspace_id)
    workspace = await get_workspace(session, principal.workspace_id)
    key = site_key(webhook_secret(secrets, workspace), workspace.id)
    tpl = page(
        request,
        "funnels_campaigns/forms.html",
        principal,
        forms=[(f, embed_code(f, base), f"{base.rstrip('/')}/t/f/{f.public_id}") for f in forms],
        script_tag=snippet_tag(base, key),
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


@post(FORMS)
async def create_form_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    settings: CurrentSettings,
    secrets: Secrets,
    clock: CurrentClock,
    data: Form,
) -> Template | Redirect:
    require_admin(principal)
    keys = [k.strip() for k in data.get("fields", "").split(",") if k.strip()]
    try:
        async with uow.attempt():
            await create_form(
                uow.session,
                principal.workspace_id,
                name=data.get("name", ""),
                fields=[FormField(k, k.replace("_", " ").capitalize()) for k in keys],
                add_tag=data.get("add_tag", "").strip() or None,
                add_list=data.get("add_list", "").strip() or None,
                now=clock.now(),
            )
    except DomainError as exc:
        return await _forms(
            request,
            principal,
            uow.session,
            settings,
            secrets,
            error=error_message(exc, FORM_LABELS),
            form=data,
        )
    return Redirect(FORMS)


@get(CAMPAIGNS)
async def campaigns_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    segment: FromQuery[str | None] = None,
) -> Template:
    """Campaigns; ``segment`` (predicate JSON, from the segment builder) fills the new
    campaign's audience."""
    return await _campaigns(request, principal, session, segment=segment)


def _predicate_json(text: str | None) -> dict[str, Any] | None:
    """A predicate posted or linked as JSON text; anything else is no predicate."""
    try:
        value = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


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
        "initial": _predicate_json(form.get("audience_predicate") or segment),
    }
    tpl = page(
        request,
        "funnels_campaigns/campaigns.html",
        principal,
        campaigns=listed,
        builder=builder,
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
    audience: dict[str, Any] | None = None
    tag = data.get("audience_tag", "").strip()
    if tag:
        audience = {"kind": "has_tag", "tag": tag}
    built = data.get("audience_predicate", "").strip()
    if built:
        rows = _predicate_json(built)
        if rows is None:
            return await _campaigns(
                request, principal, uow.session, error="Audience: not a segment", form=data
            )
        audience = rows if audience is None else {"kind": "all", "predicates": [audience, rows]}
    try:
        rate = int(data.get("rate_per_minute", "600") or 600)
        async with uow.attempt():
            campaign = await create_campaign(
                uow.session,
                principal.workspace_id,
                CampaignData(
                    name=data.get("name", ""),
                    subject=data.get("subject", ""),
                    body=data.get("body", ""),
                    html=data.get("html") or None,
                    audience=audience,
                    rate_per_minute=rate,
                ),
                clock.now(),
            )
    except ValueError:
        return await _campaigns(
            request, principal, uow.session, error="Messages per minute: a whole number", form=data
        )
    except DomainError as exc:
        return await _campaigns(
            request, principal, uow.session, error=error_message(exc, CAMPAIGN_LABELS), form=data
        )
    return Redirect(f"{CAMPAIGNS}/{campaign.id}")


async def _detail(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    clock: Clock,
    campaign_id: int,
    template: str,
    **extra: Any,
) -> Template:
    campaign = await get_campaign(session, principal.workspace_id, campaign_id)
    counts = await counters(session, campaign_id)
    delivery = await activity.campaign_delivery(session, campaign, clock.now())
    snapshot = (
        None
        if campaign.audience_job_id is None
        else await read_progress(
            session,
            principal.workspace_id,
            campaign.audience_job_id,
            kinds=(AUDIENCE.name,),
            view=AUDIENCE_VIEW,
        )
    )
    tpl = page(
        request,
        template,
        principal,
        campaign=campaign,
        counts=counts,
        delivery=delivery,
        describe_audience=audiences.describe,
        share=progress(counts),
        snapshot=snapshot,
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


AUDIENCE_VIEW = ProgressView(
    title="Audience snapshot",
    poll_url="",  # the campaign's progress polls, snapshot included
    items="recipients",
    counters=(("recipients", "Recipients"),),
    refusals=False,
    prefix="audience-",
)


@get(f"{CAMPAIGNS}/{{campaign_id:int}}")
async def campaign_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    campaign_id: FromPath[int],
) -> Template:
    return await _detail(
        request, principal, session, clock, campaign_id, "funnels_campaigns/campaign.html"
    )


@get(f"{CAMPAIGNS}/{{campaign_id:int}}/progress")
async def campaign_progress(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    campaign_id: FromPath[int],
) -> Template:
    return await _detail(
        request, principal, session, clock, campaign_id, "funnels_campaigns/_progress.html"
    )


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/schedule")
async def schedule_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    campaign_id: FromPath[int],
    data: Form,
) -> Template | Redirect:
    require_admin(principal)
    now = clock.now()
    raw = data.get("send_at", "").strip()
    try:
        send_at = datetime.fromisoformat(raw).replace(tzinfo=UTC) if raw else now
    except ValueError:
        return await _detail(
            request,
            principal,
            uow.session,
            clock,
            campaign_id,
            "funnels_campaigns/campaign.html",
            error="Send at: a date and time (UTC)",
        )
    try:
        async with uow.attempt():
            await schedule_campaign(uow.session, principal.workspace_id, campaign_id, send_at, now)
    except DomainError as exc:
        return await _detail(
            request,
            principal,
            uow.session,
            clock,
            campaign_id,
            "funnels_campaigns/campaign.html",
            error=error_message(exc, CAMPAIGN_LABELS),
        )
    return Redirect(f"{CAMPAIGNS}/{campaign_id}")


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/cancel")
async def cancel_page(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, campaign_id: FromPath[int]
) -> Redirect:
    require_admin(principal)
    await cancel_campaign(uow.session, principal.workspace_id, campaign_id, clock.now())
    return Redirect(f"{CAMPAIGNS}/{campaign_id}")


@get("/ui/funnels/{funnel_id:int}/simulate")
async def simulate_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    funnel_id: FromPath[int],
    email: FromQuery[str | None] = None,
    source: FromQuery[str] = "draft",
) -> Template:
    """Pick a contact, see the path they would take and every message they would get.

    The simulation runs in a transaction of its own that it throws away (the runtime's
    database), apart from the page's reads."""
    funnel = await get_funnel(session, principal.workspace_id, funnel_id)
    contact = await find_by_email(session, principal.workspace_id, email) if email else None
    result = None
    error = None
    if email and contact is None:
        error = f"No contact with e-mail {email}"
    elif contact is not None:
        try:
            result = await simulate(
                runtime.db,
                principal.workspace_id,
                funnel_id=funnel_id,
                contact_id=contact.id,
                source="published" if source == "published" else "draft",
                start=runtime.clock.now(),
            )
        except DomainError as exc:
            error = error_message(exc, {})
    tpl = page(
        request,
        "funnels_campaigns/simulate.html",
        principal,
        funnel=funnel,
        email=email or "",
        source=source,
        result=result,
        error=error,
    )
    if error:
        tpl.status_code = 422
    return tpl


NAV: list[tuple[str, str]] = [(EVENTS, "Events"), (FORMS, "Forms"), (CAMPAIGNS, "Campaigns")]
ROUTES: list[Any] = [
    events_page,
    events_stream,
    forms_page,
    create_form_page,
    campaigns_page,
    create_campaign_page,
    campaign_page,
    campaign_progress,
    schedule_page,
    cancel_page,
    simulate_page,
]
PUBLIC_ROUTES: list[Any] = []
