"""Dashboard pages of ingestion and campaigns: the event stream, hosted forms and the site
snippet, campaigns (create, schedule, progress and counters), and a funnel's simulator."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from litestar import Request, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, FromQuery
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession
from app.engines.funnels import reads
from app.engines.funnels.campaigns import review
from app.engines.funnels.campaigns.due.audience import AUDIENCE
from app.engines.funnels.campaigns.models import DRAFT, SCHEDULED, Campaign
from app.engines.funnels.campaigns.records.counters import counters, progress
from app.engines.funnels.campaigns.service import (
    CampaignData,
    cancel_campaign,
    create_campaign,
    get_campaign,
    list_campaigns,
    schedule_campaign,
    update_campaign,
)
from app.engines.funnels.campaigns.work import trial
from app.engines.funnels.consent import gate
from app.engines.funnels.contacts.saved_segments import list_segments
from app.engines.funnels.contacts.store import find_by_email
from app.engines.funnels.definitions.service import get_funnel
from app.engines.funnels.definitions.simulate import simulate
from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.events.forms import FormField, create_form, embed_code, list_forms
from app.engines.funnels.events.site_snippet import snippet_tag
from app.engines.funnels.events.tracking import site_key
from app.errors import DomainError, ValidationFailed
from app.integrations.mail import MailError
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
    "preheader": "Preheader",
    "body": "Text",
    "to": "Send a test to",
    "contact_id": "Preview as",
    "confirm": "Confirm",
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
    saved_segment: FromQuery[int | None] = None,
) -> Template:
    """Campaigns; ``segment`` (predicate JSON, from the segment builder) or ``saved_segment``
    (a saved segment's id) fills the new campaign's audience."""
    form = {"saved_segment": str(saved_segment)} if saved_segment else None
    return await _campaigns(request, principal, session, segment=segment, form=form)


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
        campaign_data = _campaign_data(data)
        async with uow.attempt():
            campaign = await create_campaign(
                uow.session, principal.workspace_id, campaign_data, clock.now()
            )
    except DomainError as exc:
        return await _campaigns(
            request, principal, uow.session, error=error_message(exc, CAMPAIGN_LABELS), form=data
        )
    return Redirect(f"{CAMPAIGNS}/{campaign.id}")


def _audience(data: dict[str, str]) -> dict[str, Any] | None:
    """The audience a form describes: a saved segment, conditions built in the rows, a tag; all
    of them when several are given (none: everyone with an e-mail address)."""
    parts: list[dict[str, Any]] = []
    saved = data.get("saved_segment", "").strip()
    if saved:
        try:
            parts.append({"kind": "segment", "segment_id": int(saved)})
        except ValueError:
            raise ValidationFailed.field(
                "audience", "choose a saved segment from the list"
            ) from None
    built = data.get("audience_predicate", "").strip()
    if built:
        rows = _predicate_json(built)
        if rows is None:
            raise ValidationFailed.field("audience", "not a segment")
        parts.append(rows)
    tag = data.get("audience_tag", "").strip()
    if tag:
        parts.append({"kind": "has_tag", "tag": tag})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"kind": "all", "predicates": parts}


def _campaign_data(data: dict[str, str]) -> CampaignData:
    try:
        rate = int(data.get("rate_per_minute", "600") or 600)
    except ValueError:
        raise ValidationFailed.field("rate_per_minute", "a whole number") from None
    return CampaignData(
        name=data.get("name", ""),
        subject=data.get("subject", ""),
        preheader=data.get("preheader", ""),
        body=data.get("body", ""),
        html=data.get("html") or None,
        audience=_audience(data),
        rate_per_minute=rate,
    )


def _editable(campaign: Campaign) -> bool:
    return campaign.status in (DRAFT, SCHEDULED) and campaign.materialised_at is None


def _split_audience(audience: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """The form's view of a stored audience: the saved segment it starts with, and the rest."""
    if audience is None:
        return "", None
    if audience.get("kind") == "segment":
        return str(audience.get("segment_id", "")), None
    items = audience.get("predicates") or []
    if audience.get("kind") == "all" and items and items[0].get("kind") == "segment":
        rest = items[1:]
        other = (
            None if not rest else rest[0] if len(rest) == 1 else {"kind": "all", "predicates": rest}
        )
        return str(items[0].get("segment_id", "")), other
    return "", audience


async def _composer(
    session: ReadSession,
    principal: Principal,
    campaign: Campaign,
    *,
    settings: Settings,
    secrets: SecretBox,
    now: datetime,
    preview_email: str | None,
) -> dict[str, Any]:
    """What the composer shows of an editable campaign: its form, the preview for a chosen
    contact, the review (audience after suppressions and the cap)."""
    ws = principal.workspace_id
    options = await audiences.builder_options(session, ws)
    saved, rest = _split_audience(campaign.audience)
    contact = await find_by_email(session, ws, preview_email) if preview_email else None
    preview_error = (
        f"No contact with e-mail {preview_email}" if preview_email and contact is None else None
    )
    shown = await trial.preview(
        session,
        campaign,
        contact_id=contact.id if contact is not None else None,
        base_url=settings.web.public_url,
        domain=settings.mail.from_address.rpartition("@")[2] or "localhost",
    )
    return {
        "edit_form": {
            "name": campaign.name,
            "subject": campaign.subject,
            "preheader": campaign.preheader or "",
            "body": campaign.body,
            "html": campaign.html or "",
            "rate_per_minute": str(campaign.rate_per_minute),
            "saved_segment": saved,
        },
        "builder": {
            **options,
            "count_url": f"{audiences.SEGMENTS}/count",
            "initial": rest,
        },
        "segments": options["segments"],
        "preview": shown,
        "preview_email": preview_email or "",
        "preview_error": preview_error,
        "review": await review.review(
            session, campaign, address_key=gate.address_key(secrets), now=now
        ),
    }


async def _detail(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    clock: Clock,
    campaign_id: int,
    template: str,
    *,
    settings: Settings | None = None,
    secrets: SecretBox | None = None,
    preview_email: str | None = None,
    **extra: Any,
) -> Template:
    campaign = await get_campaign(session, principal.workspace_id, campaign_id)
    names = {s.id: s.name for s in await list_segments(session, principal.workspace_id)}
    if settings is not None and secrets is not None and _editable(campaign):
        composer = await _composer(
            session,
            principal,
            campaign,
            settings=settings,
            secrets=secrets,
            now=clock.now(),
            preview_email=preview_email,
        )
        extra = {**composer, **extra}
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
        describe_audience=lambda p: audiences.describe(p, names=names),
        editable=_editable(campaign),
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
    settings: CurrentSettings,
    secrets: Secrets,
    campaign_id: FromPath[int],
    preview: FromQuery[str | None] = None,
    notice: FromQuery[str | None] = None,
) -> Template:
    """A campaign: the composer while it can be edited (audience, message, preview as a chosen
    contact at desktop and phone width, test send, review and confirm), then its progress."""
    return await _detail(
        request,
        principal,
        session,
        clock,
        campaign_id,
        "funnels_campaigns/campaign.html",
        settings=settings,
        secrets=secrets,
        preview_email=(preview or "").strip() or None,
        notice=notice,
    )


async def _composer_error(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    clock: Clock,
    settings: Settings,
    secrets: SecretBox,
    campaign_id: int,
    **extra: Any,
) -> Template:
    return await _detail(
        request,
        principal,
        session,
        clock,
        campaign_id,
        "funnels_campaigns/campaign.html",
        settings=settings,
        secrets=secrets,
        **extra,
    )


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/edit")
async def edit_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    secrets: Secrets,
    campaign_id: FromPath[int],
    data: Form,
) -> Template | Redirect:
    """Save the audience and the message; refused once the campaign has started (FN-76)."""
    require_admin(principal)
    try:
        campaign_data = _campaign_data(data)
        async with uow.attempt():
            await update_campaign(
                uow.session, principal.workspace_id, campaign_id, campaign_data, clock.now()
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _composer_error(
            request,
            principal,
            uow.session,
            clock,
            settings,
            secrets,
            campaign_id,
            error=error_message(exc, CAMPAIGN_LABELS),
            edit_error=True,
        )
    return Redirect(f"{CAMPAIGNS}/{campaign_id}?notice=Saved#message")


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/test-send")
async def test_send_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    clock: CurrentClock,
    settings: CurrentSettings,
    secrets: Secrets,
    campaign_id: FromPath[int],
    data: Form,
) -> Template | Redirect:
    """Send the campaign to a few addresses as a test, through the mail server, counted
    nowhere (the API's ``POST /api/v1/funnels/campaigns/{id}/test-send``)."""
    require_admin(principal)
    to = [a for a in data.get("to", "").replace(";", ",").split(",") if a.strip()]
    preview_email = data.get("preview", "").strip() or None
    try:
        # Its own read, closed before the mail server is called: no connection waits on it.
        async with runtime.db.read() as reading:
            campaign = await get_campaign(reading, principal.workspace_id, campaign_id)
            contact = (
                await find_by_email(reading, principal.workspace_id, preview_email)
                if preview_email
                else None
            )
            emails = await trial.test_messages(
                reading,
                campaign,
                to=to,
                contact_id=contact.id if contact is not None else None,
                base_url=settings.web.public_url,
                domain=settings.mail.from_address.rpartition("@")[2] or "localhost",
                address_key=gate.address_key(runtime.secrets),
                now=runtime.clock.now(),
            )
        transport = runtime.resources.require(FunnelsDeps).trial_mail
        for email in emails:
            await transport.send(email)
        async with runtime.db.write() as uow:
            await trial.record_test(uow.session, campaign, len(emails), runtime.clock.now())
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _composer_error(
            request,
            principal,
            session,
            clock,
            settings,
            secrets,
            campaign_id,
            test_error=f"Test not sent: {error_message(exc, CAMPAIGN_LABELS)}",
            test_to=data.get("to", ""),
            preview_email=preview_email,
        )
    except MailError as exc:
        return await _composer_error(
            request,
            principal,
            session,
            clock,
            settings,
            secrets,
            campaign_id,
            test_error=f"Test not sent: the mail server answered {exc}",
            test_to=data.get("to", ""),
            preview_email=preview_email,
        )
    said = f"Test sent to {', '.join(e.to[0] for e in emails)}: {emails[0].subject}"
    query = f"notice={quote(said)}" + (f"&preview={quote(preview_email)}" if preview_email else "")
    return Redirect(f"{CAMPAIGNS}/{campaign_id}?{query}#test")


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
    settings: CurrentSettings,
    secrets: Secrets,
    campaign_id: FromPath[int],
    data: Form,
) -> Template | Redirect:
    """Send now or at a time, once the person confirmed the review (FN-76)."""
    require_admin(principal)
    now = clock.now()
    raw = data.get("send_at", "").strip()
    problem = None
    if data.get("confirm") != "yes":
        problem = "Confirm: tick the box to confirm who gets this campaign"
    try:
        send_at = datetime.fromisoformat(raw).replace(tzinfo=UTC) if raw else now
    except ValueError:
        problem, send_at = "Send at: a date and time (UTC)", now
    if problem is not None:
        return await _composer_error(
            request, principal, uow.session, clock, settings, secrets, campaign_id, error=problem
        )
    try:
        async with uow.attempt():
            await schedule_campaign(uow.session, principal.workspace_id, campaign_id, send_at, now)
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await _composer_error(
            request,
            principal,
            uow.session,
            clock,
            settings,
            secrets,
            campaign_id,
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
    edit_page,
    test_send_page,
    schedule_page,
    cancel_page,
    simulate_page,
]
PUBLIC_ROUTES: list[Any] = []
