"""A campaign's page: the composer while it can be edited (its form, the preview as a chosen
contact, the review of who it would reach), then its progress — counters, delivery over time and
the audience snapshot's job — also served alone for the page to poll."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Request, get
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from app.clock import Clock
from app.db.session import ReadSession
from app.engines.funnels.campaigns import review
from app.engines.funnels.campaigns.due.audience import AUDIENCE
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.records.counters import counters, progress
from app.engines.funnels.campaigns.service import get_campaign
from app.engines.funnels.campaigns.work import trial
from app.engines.funnels.consent import gate
from app.engines.funnels.contacts.saved_segments import list_segments
from app.engines.funnels.contacts.store import find_by_email
from app.platform.crypto import SecretBox
from app.platform.service import Principal
from app.settings import Settings
from app.web.auth import CurrentPrincipal
from app.web.dashboard import activity, audiences
from app.web.dashboard.bulk_progress import ProgressView, read_progress
from app.web.dashboard.common import page
from app.web.dashboard.funnels_campaign_form import CAMPAIGNS, editable, split_audience
from app.web.deps import CurrentClock, CurrentSettings, Reads, Secrets

AUDIENCE_VIEW = ProgressView(
    title="Audience snapshot",
    poll_url="",  # the campaign's progress polls, snapshot included
    items="recipients",
    counters=(("recipients", "Recipients"),),
    refusals=False,
    prefix="audience-",
)


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
    saved, rest = split_audience(campaign.audience)
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


async def detail(
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
    """The campaign's ``template`` (its whole page, or the progress part the page polls); with
    ``settings`` and ``secrets`` the composer too, while the campaign can be edited."""
    campaign = await get_campaign(session, principal.workspace_id, campaign_id)
    names = {s.id: s.name for s in await list_segments(session, principal.workspace_id)}
    if settings is not None and secrets is not None and editable(campaign):
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
        editable=editable(campaign),
        share=progress(counts),
        snapshot=snapshot,
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


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
    return await detail(
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


@get(f"{CAMPAIGNS}/{{campaign_id:int}}/progress")
async def campaign_progress(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    campaign_id: FromPath[int],
) -> Template:
    return await detail(
        request, principal, session, clock, campaign_id, "funnels_campaigns/_progress.html"
    )


async def composer_with(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    clock: Clock,
    settings: Settings,
    secrets: SecretBox,
    campaign_id: int,
    **extra: Any,
) -> Template:
    """The campaign's page shown again after a refused action, with its message in ``extra``."""
    return await detail(
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


ROUTES: list[Any] = [campaign_page, campaign_progress]
