"""Funnels API: the event stream, inbound events, hosted forms, the site snippet, the simulator
(FN-27) and manual entry of a segment."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from litestar import Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody

from app.db.session import ReadSession, UnitOfWork
from app.engines.funnels import reads
from app.engines.funnels.contacts.fields import check_predicate
from app.engines.funnels.contacts.segments import Predicate
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions.service import current_version, get_funnel
from app.engines.funnels.definitions.simulate import simulate
from app.engines.funnels.events.forms import FormField, create_form, embed_code, list_forms
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.events.site_snippet import snippet_tag
from app.engines.funnels.events.tracking import contact_token, site_key
from app.engines.funnels.runs.due.enrolment import start_enrolment
from app.engines.funnels.schemas import MembershipName
from app.pagination import Page, page_of
from app.platform.crypto import SecretBox
from app.platform.service import get_workspace, webhook_secret
from app.schemas import Count, GivenName, Key, Name, RowRef, Schema, Text
from app.web.api.common import Once, api_router
from app.web.api.jobs import job_url
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_admin
from app.web.deps import CurrentClock, CurrentSettings, Paging, Queue, Reads, Secrets, Writes


class EventOut(Schema):
    id: int
    contact_id: int
    name: Name
    source: str
    properties: dict[str, Any]
    occurred_at: datetime


class InboundOut(Schema):
    id: int
    source: str
    name: Name
    external_id: str | None
    received_at: datetime
    processed_at: datetime | None
    contact_id: int | None
    outcome: str | None


@get("/events")
async def list_events(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    contact_id: FromQuery[int | None] = None,
    name: FromQuery[str | None] = None,
) -> Page[EventOut]:
    """The workspace's contact events, newest first."""
    rows = await reads.contact_events(
        session,
        principal.workspace_id,
        before=paging.after,
        limit=paging.fetch,
        contact_id=contact_id,
        name=name,
    )
    return page_of(
        [
            EventOut(
                id=e.id,
                contact_id=e.contact_id,
                name=e.name,
                source=e.source,
                properties=e.properties or {},
                occurred_at=e.occurred_at,
            )
            for e in rows
        ],
        paging.limit,
    )


@get("/inbound")
async def list_inbound(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
) -> Page[InboundOut]:
    """Events as received (before processing), newest first, with what processing did."""
    rows = await reads.inbound_events(
        session, principal.workspace_id, before=paging.after, limit=paging.fetch
    )
    return page_of([inbound_out(e) for e in rows], paging.limit)


def inbound_out(e: InboundEvent) -> InboundOut:
    return InboundOut(
        id=e.id,
        source=e.source,
        name=e.name,
        external_id=e.external_id,
        received_at=e.received_at,
        processed_at=e.processed_at,
        contact_id=e.contact_id,
        outcome=e.outcome,
    )


# -- forms -------------------------------------------------------------------------------------


class FormFieldIn(Schema):
    key: Key
    label: Name = ""
    required: bool = False


class FormIn(Schema):
    name: GivenName
    fields: Annotated[list[FormFieldIn], msgspec.Meta(max_length=100)] = msgspec.field(
        default_factory=list
    )
    add_tag: MembershipName | None = None
    add_list: MembershipName | None = None
    success_message: Text = "Thank you!"


class FormOut(Schema):
    id: int
    public_id: str
    name: Name
    fields: list[dict[str, Any]]
    add_tag: str | None
    add_list: str | None
    hosted_url: str
    embed_html: str


def form_out(form: Any, base_url: str) -> FormOut:
    return FormOut(
        id=form.id,
        public_id=form.public_id,
        name=form.name,
        fields=form.fields,
        add_tag=form.add_tag,
        add_list=form.add_list,
        hosted_url=f"{base_url.rstrip('/')}/t/f/{form.public_id}",
        embed_html=embed_code(form, base_url),
    )


@post("/forms")
async def create_form_api(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    data: JSONBody[FormIn],
) -> FormOut:
    form = await create_form(
        uow.session,
        principal.workspace_id,
        name=data.name,
        fields=[FormField(f.key, f.label, f.required) for f in data.fields],
        add_tag=data.add_tag,
        add_list=data.add_list,
        success_message=data.success_message,
        now=clock.now(),
    )
    return form_out(form, settings.web.public_url)


@get("/forms")
async def list_forms_api(
    principal: CurrentPrincipal, session: Reads, settings: CurrentSettings
) -> list[FormOut]:
    forms = await list_forms(session, principal.workspace_id)
    return [form_out(f, settings.web.public_url) for f in forms]


# -- site snippet ------------------------------------------------------------------------------


class SiteOut(Schema):
    site_key: str
    script_tag: str


class VisitorOut(Schema):
    contact_id: int
    token: str
    """Append as ``?swl=<token>`` to links to your site so the snippet knows the visitor."""


async def _secret(session: ReadSession, secrets: SecretBox, workspace_id: int) -> str:
    return webhook_secret(secrets, await get_workspace(session, workspace_id))


@get("/site")
async def site_info(
    principal: CurrentPrincipal, session: Reads, secrets: Secrets, settings: CurrentSettings
) -> SiteOut:
    secret = await _secret(session, secrets, principal.workspace_id)
    key = site_key(secret, principal.workspace_id)
    return SiteOut(site_key=key, script_tag=snippet_tag(settings.web.public_url, key))


@get("/contacts/{contact_id:int}/visitor-token")
async def visitor_token(
    principal: CurrentPrincipal, session: Reads, secrets: Secrets, contact_id: FromPath[int]
) -> VisitorOut:
    await get_contact(session, principal.workspace_id, contact_id)
    secret = await _secret(session, secrets, principal.workspace_id)
    return VisitorOut(
        contact_id=contact_id, token=contact_token(secret, principal.workspace_id, contact_id)
    )


# -- simulator and manual entry ----------------------------------------------------------------


class SimulateIn(Schema):
    contact_id: RowRef
    source: Literal["draft", "published"] = "draft"
    start: datetime | None = None
    horizon_days: Annotated[
        Count, msgspec.Meta(extra_json_schema={"minimum": 1, "maximum": 3660})
    ] = 400


class SimStepOut(Schema):
    at: datetime
    node_id: str
    kind: str
    decision: str


class SimMessageOut(Schema):
    node_id: str
    channel: str
    at: datetime
    local_time: str
    day: int
    content: dict[str, Any]


class SimulationOut(Schema):
    entered: bool
    outcome: str
    started_at: datetime
    finished_at: datetime
    path: list[SimStepOut]
    messages: list[SimMessageOut]


@post("/{funnel_id:int}/simulation", status_code=200)
async def simulate_api(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    funnel_id: FromPath[int],
    data: JSONBody[SimulateIn],
) -> SimulationOut:
    """Dry-run a contact through the funnel (FN-27); writes nothing."""
    start = data.start or runtime.clock.now()
    if start.tzinfo is None:
        from app.errors import ValidationFailed

        raise ValidationFailed.field("start", "needs a time zone offset")
    result = await simulate(
        runtime.db,
        principal.workspace_id,
        funnel_id=funnel_id,
        contact_id=data.contact_id,
        source=data.source,
        start=start,
        horizon_days=data.horizon_days,
    )
    return simulation_out(result)


def simulation_out(result: Any) -> SimulationOut:
    return SimulationOut(
        entered=result.entered,
        outcome=result.outcome,
        started_at=result.started_at,
        finished_at=result.finished_at,
        path=[
            SimStepOut(at=s.at, node_id=s.node_id, kind=s.kind, decision=s.decision)
            for s in result.path
        ],
        messages=[
            SimMessageOut(
                node_id=m.node_id,
                channel=m.channel,
                at=m.at,
                local_time=m.local_time,
                day=m.day,
                content=m.content,
            )
            for m in result.messages
        ],
    )


class SegmentEntryIn(Schema):
    segment: Predicate | None = None
    """Who enters (``None``: every contact); the funnel's entry predicate applies too."""


class SegmentEntryOut(Schema):
    started: int
    """Runs started; while ``job`` runs, those of the first chunk (the job counts the rest)."""
    job: str | None = None
    """A large segment enters through a bulk job: its status URL."""


@post("/{funnel_id:int}/segment-entries", status_code=200)
async def enter_segment(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    job_queue: Queue,
    settings: CurrentSettings,
    funnel_id: FromPath[int],
    data: JSONBody[SegmentEntryIn],
) -> Response[SegmentEntryOut]:
    """The ``manual`` trigger for a segment: an announcement you decide to send. A retry with
    the same ``Idempotency-Key`` answers the first count."""
    require_admin(principal)

    async def action(uow: UnitOfWork) -> SegmentEntryOut:
        funnel = await get_funnel(uow.session, principal.workspace_id, funnel_id)
        version = await current_version(uow.session, funnel)
        if data.segment is not None:
            await check_predicate(
                uow.session, principal.workspace_id, data.segment, field="segment"
            )
        entered = await start_enrolment(
            uow,
            job_queue,
            version,
            now=clock.now(),
            contact_ids=None,
            predicate=data.segment,
            chunk_items=settings.bulk.chunk_items,
        )
        return SegmentEntryOut(started=entered.started, job=job_url(entered.job))

    return await once(action, status_code=200)


ROUTERS: list[Any] = [
    api_router(
        "/funnels",
        [
            list_events,
            list_inbound,
            create_form_api,
            list_forms_api,
            site_info,
            visitor_token,
            simulate_api,
            enter_segment,
        ],
        tag="funnels",
    )
]
