"""Campaigns API (FN-28 to FN-30): create, edit, schedule, snapshot the audience, cancel, and read
progress and counters (recomputed from delivery events on every read)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, patch, post
from litestar.params import FromPath, JSONBody, QueryParameter

from app.db.session import UnitOfWork
from app.engines.funnels.campaigns import review
from app.engines.funnels.campaigns.due.audience import start_materialising
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.recipient_states import RECIPIENT_STATUSES
from app.engines.funnels.campaigns.records.counters import counters, list_recipients, progress
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
from app.engines.funnels.contacts.segments import Predicate
from app.engines.funnels.definitions.funnel_settings import Holdout
from app.engines.funnels.deps import FunnelsDeps
from app.errors import DomainError, ValidationFailed
from app.integrations.mail import MailError
from app.pagination import Page, page_of
from app.schemas import (
    Count,
    Document,
    EmailAddress,
    GivenDocument,
    GivenName,
    GivenSubject,
    RowRef,
    Schema,
)
from app.settings import Settings
from app.web.api.common import Once, api_router
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import CurrentClock, CurrentSettings, Paging, Queue, Reads, Secrets, Writes


class CampaignIn(Schema):
    name: GivenName
    subject: GivenSubject
    body: GivenDocument
    html: Document | None = None
    audience: Predicate | None = None
    rate_per_minute: Count = 600
    topic: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] = "marketing"
    """What the campaign is about: the preference page lets a contact leave one topic."""
    transactional: bool = False
    """A notice every recipient must get: no unsubscribe links, sent despite marketing
    opt-outs (never after a bounce or a complaint), not counted by the frequency cap."""
    holdout: Holdout | None = None
    """A random control share of the audience that gets nothing; the campaign's holdout report
    (``GET /api/v1/funnels/campaigns/{id}/holdout``) shows the lift against it."""
    preheader: Annotated[str, msgspec.Meta(max_length=500)] = ""
    """The line mail clients show after the subject."""


class CountersOut(Schema):
    audience: int
    pending: int
    sent: int
    skipped: int
    failed: int
    delivered: int
    opened: int
    clicked: int
    bounced: int
    complained: int
    unsubscribed: int


class CampaignOut(Schema):
    id: int
    name: str
    subject: str
    preheader: str
    body: str
    html: str | None
    topic: str
    transactional: bool
    audience: dict[str, Any] | None
    holdout: dict[str, Any] | None
    status: str
    send_at: datetime | None
    rate_per_minute: Count
    materialised_at: datetime | None
    audience_size: int
    """Recipients snapshotted (so far, while ``status`` is ``materialising``)."""
    audience_job: str | None
    """The bulk job taking a large audience's snapshot, for its progress (``None``: taken at
    once)."""
    checkpoint: int
    started_at: datetime | None
    finished_at: datetime | None
    progress: float | None = None
    counters: CountersOut | None = None


class CampaignScheduleIn(Schema):
    send_at: datetime | None = None
    """When to send (``None``: now)."""


def _data(data: CampaignIn) -> CampaignData:
    audience = None if data.audience is None else msgspec.to_builtins(data.audience)
    return CampaignData(
        name=data.name,
        subject=data.subject,
        body=data.body,
        html=data.html,
        audience=audience,
        rate_per_minute=data.rate_per_minute,
        topic=data.topic,
        transactional=data.transactional,
        holdout=None if data.holdout is None else msgspec.to_builtins(data.holdout),
        preheader=data.preheader,
    )


def campaign_out(c: Campaign, counts: Any = None) -> CampaignOut:
    return CampaignOut(
        id=c.id,
        name=c.name,
        subject=c.subject,
        preheader=c.preheader or "",
        body=c.body,
        html=c.html,
        topic=c.topic,
        transactional=bool(c.transactional),
        audience=c.audience,
        holdout=c.holdout,
        status=c.status,
        send_at=c.send_at,
        rate_per_minute=c.rate_per_minute,
        materialised_at=c.materialised_at,
        audience_size=c.audience_size,
        audience_job=None if c.audience_job_id is None else f"/api/v1/jobs/{c.audience_job_id}",
        checkpoint=c.checkpoint,
        started_at=c.started_at,
        finished_at=c.finished_at,
        progress=None if counts is None else round(progress(counts), 4),
        counters=None if counts is None else CountersOut(**_counts(counts)),
    )


def _counts(counts: Any) -> dict[str, int]:
    return {name: getattr(counts, name) for name in CountersOut.__struct_fields__}


@post("/campaigns")
async def create(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    data: JSONBody[CampaignIn],
) -> Response[CampaignOut]:
    """Create a draft (``Idempotency-Key`` makes a retried request create it once)."""

    async def action(uow: UnitOfWork) -> CampaignOut:
        campaign = await create_campaign(
            uow.session, principal.workspace_id, _data(data), clock.now()
        )
        return campaign_out(campaign)

    return await once(action)


@get("/campaigns")
async def index(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
) -> Page[CampaignOut]:
    rows = await list_campaigns(
        session, principal.workspace_id, after=paging.after, limit=paging.fetch
    )
    return page_of([campaign_out(c) for c in rows], paging.limit)


@get("/campaigns/{campaign_id:int}")
async def show(
    principal: CurrentPrincipal, session: Reads, campaign_id: FromPath[int]
) -> CampaignOut:
    campaign = await get_campaign(session, principal.workspace_id, campaign_id)
    counts = await counters(session, campaign.id)
    return campaign_out(campaign, counts)


@patch("/campaigns/{campaign_id:int}")
async def edit(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    campaign_id: FromPath[int],
    data: JSONBody[CampaignIn],
) -> CampaignOut:
    campaign = await update_campaign(
        uow.session, principal.workspace_id, campaign_id, _data(data), clock.now()
    )
    return campaign_out(campaign)


@post("/campaigns/{campaign_id:int}/schedule", status_code=200)
async def schedule(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    campaign_id: FromPath[int],
    data: JSONBody[CampaignScheduleIn],
) -> Response[CampaignOut]:
    """Schedule the send (``Idempotency-Key``: a retry answers the first schedule)."""
    now = clock.now()
    if data.send_at is not None and data.send_at.tzinfo is None:
        raise ValidationFailed.field("send_at", "needs a time zone offset")

    async def action(uow: UnitOfWork) -> CampaignOut:
        campaign = await schedule_campaign(
            uow.session, principal.workspace_id, campaign_id, data.send_at or now, now
        )
        return campaign_out(campaign)

    return await once(action, status_code=200)


@post("/campaigns/{campaign_id:int}/audience", status_code=200)
async def snapshot(
    principal: CurrentPrincipal,
    uow: Writes,
    job_queue: Queue,
    clock: CurrentClock,
    settings: CurrentSettings,
    campaign_id: FromPath[int],
) -> CampaignOut:
    """Snapshot the audience now and start sending (refused when already snapshotted). An
    audience larger than one chunk is taken by a background job: the campaign is
    ``materialising`` until it is complete, with the job's progress at ``audience_job``."""
    await get_campaign(uow.session, principal.workspace_id, campaign_id)
    # The job for the rest of a large audience is enqueued once the request's commit succeeded.
    campaign = await start_materialising(
        uow, job_queue, campaign_id, clock.now(), chunk_items=settings.bulk.chunk_items
    )
    return campaign_out(campaign, await counters(uow.session, campaign_id))


@post("/campaigns/{campaign_id:int}/cancel", status_code=200)
async def cancel(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, campaign_id: FromPath[int]
) -> CampaignOut:
    campaign = await cancel_campaign(uow.session, principal.workspace_id, campaign_id, clock.now())
    return campaign_out(campaign)


class RecipientOut(Schema):
    seq: int
    contact_id: int
    status: str
    """``pending``, ``sent``, ``skipped`` or ``failed``."""
    detail: str | None
    """Why it was skipped (the consent gate's reason: suppression, a topic left, consent
    withdrawn, an erased address, the frequency cap) or failed."""
    sent_at: datetime | None


@get("/campaigns/{campaign_id:int}/recipients")
async def recipients(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    campaign_id: FromPath[int],
    status: Annotated[
        str | None,
        QueryParameter(
            description="Only the recipients of this status.",
            schema_extra={"enum": list(RECIPIENT_STATUSES)},
        ),
    ] = None,
) -> Page[RecipientOut]:
    """The audience snapshot in ``seq`` order, each recipient's send record (``status``: only
    those)."""
    await get_campaign(session, principal.workspace_id, campaign_id)
    rows = await list_recipients(
        session, campaign_id, status=status, after=paging.after, limit=paging.fetch
    )
    items = [RecipientOut(r.seq, r.contact_id, r.status, r.detail, r.sent_at) for r in rows]
    return page_of(items, paging.limit, lambda r: r.seq)


class CampaignPreviewIn(Schema):
    contact_id: RowRef | None = None
    """Whose values fill the merge fields (none: they render empty)."""


class CampaignPreviewOut(Schema):
    subject: str
    preheader: str
    text: str
    html: str | None
    contact_id: int | None


def _mail_domain(settings: Settings) -> str:
    return settings.mail.from_address.rpartition("@")[2] or "localhost"


@post("/campaigns/{campaign_id:int}/preview", status_code=200)
async def preview(
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    campaign_id: FromPath[int],
    data: JSONBody[CampaignPreviewIn],
) -> CampaignPreviewOut:
    """The message as a chosen contact would get it, made by the sender's own renderer (FN-77)."""
    campaign = await get_campaign(session, principal.workspace_id, campaign_id)
    shown = await trial.preview(
        session,
        campaign,
        contact_id=data.contact_id,
        base_url=settings.web.public_url,
        domain=_mail_domain(settings),
    )
    return CampaignPreviewOut(
        subject=shown.subject,
        preheader=shown.preheader,
        text=shown.text,
        html=shown.html,
        contact_id=data.contact_id,
    )


class CampaignTestSendIn(Schema):
    to: Annotated[list[EmailAddress], msgspec.Meta(min_length=1, max_length=5)]
    """Where the tests go (1 to 5 addresses)."""
    contact_id: RowRef | None = None
    """Whose values fill the merge fields (none: they render empty)."""


class CampaignTestSendOut(Schema):
    sent: list[str]
    subject: str
    message_ids: list[str]


class CampaignTestSendFailed(DomainError):
    status = 502
    code = "test_send_failed"


@post("/campaigns/{campaign_id:int}/test-send", status_code=200)
async def test_send(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    campaign_id: FromPath[int],
    data: JSONBody[CampaignTestSendIn],
) -> CampaignTestSendOut:
    """Send the campaign now to up to 5 addresses through the mail server, marked as a test
    (``[Test]`` subject, ``X-Sweepline-Test`` header) and counted nowhere (FN-77). An address the
    workspace must not mail is refused (422 ``recipient_suppressed``) and nothing is sent."""
    async with runtime.db.read() as session:
        campaign = await get_campaign(session, principal.workspace_id, campaign_id)
        emails = await trial.test_messages(
            session,
            campaign,
            to=list(data.to),
            contact_id=data.contact_id,
            base_url=runtime.settings.web.public_url,
            domain=_mail_domain(runtime.settings),
            address_key=gate.address_key(runtime.secrets),
            now=runtime.clock.now(),
        )
    transport = runtime.resources.require(FunnelsDeps).trial_mail
    try:
        for email in emails:
            await transport.send(email)
    except MailError as exc:
        raise CampaignTestSendFailed(str(exc)) from None
    async with runtime.db.write() as uow:
        await trial.record_test(uow.session, campaign, len(emails), runtime.clock.now())
    return CampaignTestSendOut(
        sent=[e.to[0] for e in emails],
        subject=emails[0].subject,
        message_ids=[e.message_id for e in emails],
    )


class CampaignReviewOut(Schema):
    matched: int
    """Contacts the audience matches now (with an e-mail address)."""
    held_back: dict[str, int]
    """The consent gate's reasons (unsubscribed, bounced, outside the topic…), with counts."""
    capped: int
    """Held back by the frequency cap today."""
    cap_per_day: int | None
    cap_per_week: int | None
    will_send: int
    """What would go out if it started now (checked again at send time)."""


@get("/campaigns/{campaign_id:int}/review")
async def review_campaign(
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    secrets: Secrets,
    campaign_id: FromPath[int],
) -> CampaignReviewOut:
    """The audience's size after suppressions and the frequency cap, as of now (FN-76)."""
    campaign = await get_campaign(session, principal.workspace_id, campaign_id)
    found = await review.review(
        session, campaign, address_key=gate.address_key(secrets), now=clock.now()
    )
    return CampaignReviewOut(
        matched=found.matched,
        held_back=found.held_back,
        capped=found.capped,
        cap_per_day=found.cap.per_day,
        cap_per_week=found.cap.per_week,
        will_send=found.will_send,
    )


ROUTERS: list[Any] = [
    api_router(
        "/funnels",
        [
            create,
            index,
            show,
            edit,
            schedule,
            snapshot,
            cancel,
            recipients,
            preview,
            test_send,
            review_campaign,
        ],
        tag="funnels",
    )
]
