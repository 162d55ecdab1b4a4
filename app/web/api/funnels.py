"""Funnels JSON API: funnels with drafts, validation, test sends, publishing and versions, manual
entry and runs; its router also registers the contacts side (:mod:`.funnels_contacts`: contacts,
fields, tags, lists, segment previews), all under ``/funnels``.

Controllers stay thin: a unit of work, a service call, the response shape. Every query is scoped
to the caller's workspace; another workspace's id answers 404.
"""

from __future__ import annotations

from typing import Any

from litestar import Response, get, patch, post
from litestar.params import FromPath, FromQuery, JSONBody

from app.db.session import UnitOfWork
from app.engines.funnels import reads
from app.engines.funnels.consent import gate
from app.engines.funnels.contacts import fields as contact_fields
from app.engines.funnels.definitions import service, trial_send
from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.runs.due.enrolment import start_enrolment
from app.engines.funnels.runs.records import reports
from app.engines.funnels.schemas import (
    EnrollIn,
    EnrollOut,
    FunnelIn,
    FunnelOut,
    FunnelPatch,
    FunnelRunOut,
    ProblemOut,
    RunDetailOut,
    ValidationOut,
    VersionOut,
    effect_out,
    run_out,
    step_out,
    version_out,
)
from app.errors import DomainError, ValidationFailed
from app.integrations.mail import MailError
from app.pagination import Page, page_of
from app.schemas import EmailAddress, Key, RowRef, Schema
from app.web.api.common import Once, VersionNumber, api_router
from app.web.api.funnels_contacts import (
    contact_timeline,
    create_contact,
    create_list,
    create_tag,
    define_field,
    delete_contact,
    export_contact,
    import_contacts,
    list_contacts,
    list_fields,
    list_lists,
    list_tags,
    preview_segment,
    set_frequency_cap,
    show_contact,
    show_frequency_cap,
    update_contact,
)
from app.web.api.jobs import job_url
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import CurrentClock, CurrentSettings, Paging, Queue, Reads, Writes

# -- funnels, versions, runs -------------------------------------------------------------------


@post("", status_code=201)
async def create_funnel(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    data: JSONBody[FunnelIn],
) -> Response[FunnelOut]:
    definition = service.parse_definition(data.definition)

    async def action(uow: UnitOfWork) -> FunnelOut:
        funnel = await service.create_funnel(
            uow.session, principal.workspace_id, data.name, definition, clock.now()
        )
        return await reads.funnel_view(uow.session, funnel)

    return await once(action)


@get("")
async def list_funnels(principal: CurrentPrincipal, session: Reads) -> list[FunnelOut]:
    funnels = await service.list_funnels(session, principal.workspace_id)
    return [await reads.funnel_view(session, f) for f in funnels]


@get("/{funnel_id:int}")
async def show_funnel(
    principal: CurrentPrincipal, session: Reads, funnel_id: FromPath[int]
) -> FunnelOut:
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    return await reads.funnel_view(session, funnel)


@patch("/{funnel_id:int}")
async def edit_funnel(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    data: JSONBody[FunnelPatch],
) -> FunnelOut:
    """Edit the draft (published versions never change) or switch the funnel on or off."""
    definition = None if data.definition is None else service.parse_definition(data.definition)
    funnel = await service.update_funnel(
        uow.session,
        principal.workspace_id,
        funnel_id,
        now=clock.now(),
        name=data.name,
        definition=definition,
        active=data.active,
    )
    out = await reads.funnel_view(uow.session, funnel)
    return out


@get("/{funnel_id:int}/report")
async def funnel_report(
    principal: CurrentPrincipal, session: Reads, funnel_id: FromPath[int]
) -> reports.FunnelReport:
    """Per version and node: entered, waiting, exited, goal reached; per message node: queued,
    sent, delivered, opened, clicked, bounced, complained, unsubscribed and rates. Recomputed
    from steps and delivery events on every read. ``status`` is ``delivering`` while no run is
    active but messages still wait in the outbox."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    return await reports.funnel_report(session, funnel_id)


class TrialSendFailed(DomainError):
    status = 502
    code = "test_send_failed"


class TrialSendIn(Schema):
    node_id: Key
    to: EmailAddress
    """Where the test goes (a colleague's inbox)."""
    contact_id: RowRef | None = None
    """Whose variables fill the creative (none: empty values)."""
    draft: bool = True
    """Send the draft's node (``false``: the published version's)."""


class TrialSendOut(Schema):
    message_id: str
    to: str
    subject: str


@post("/{funnel_id:int}/test-send", status_code=200)
async def test_send(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    funnel_id: FromPath[int],
    data: JSONBody[TrialSendIn],
) -> TrialSendOut:
    """Send one message node now to a chosen address, rendered with a chosen contact's
    variables; marked as a test and counted nowhere (no run, step, outbox row or report). An
    address the workspace must not mail (bounced, complained, unsubscribed, kept suppressed
    from an erased contact) is refused: 422 ``recipient_suppressed``, naming why."""
    async with runtime.db.read() as session:
        email = await trial_send.prepare(
            session,
            principal.workspace_id,
            funnel_id,
            node_id=data.node_id,
            to=data.to,
            contact_id=data.contact_id,
            draft=data.draft,
            base_url=runtime.settings.web.public_url,
            domain=runtime.settings.mail.from_address.rpartition("@")[2] or "localhost",
            address_key=gate.address_key(runtime.secrets),
            now=runtime.clock.now(),
        )
    try:
        await runtime.resources.require(FunnelsDeps).trial_mail.send(email)
    except MailError as exc:
        raise TrialSendFailed(str(exc)) from None
    return TrialSendOut(message_id=email.message_id, to=data.to, subject=email.subject)


@post("/{funnel_id:int}/validate", status_code=200)
async def validate_draft(
    principal: CurrentPrincipal, session: Reads, funnel_id: FromPath[int]
) -> ValidationOut:
    """The validator's verdict on the draft, each problem naming its node and rule."""
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    problems = await service.check(
        session, principal.workspace_id, service.parse_definition(funnel.draft)
    )
    return ValidationOut(
        valid=not problems,
        problems=[ProblemOut(**p) for p in service.problems_to_dicts(problems)],
    )


@post("/{funnel_id:int}/publish", status_code=201)
async def publish(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    funnel_id: FromPath[int],
) -> Response[VersionOut]:
    """Freeze the draft as the next immutable version; 422 with every problem when invalid.
    A retry with the same ``Idempotency-Key`` answers the same version, not version n+1."""

    async def action(uow: UnitOfWork) -> VersionOut:
        version = await service.publish(
            uow.session,
            principal.workspace_id,
            funnel_id,
            user_id=principal.user_id,
            now=clock.now(),
        )
        return version_out(version)

    return await once(action)


@get("/{funnel_id:int}/versions")
async def list_versions(
    principal: CurrentPrincipal, session: Reads, funnel_id: FromPath[int]
) -> list[VersionOut]:
    return [
        version_out(v) for v in await service.versions(session, principal.workspace_id, funnel_id)
    ]


@get("/{funnel_id:int}/versions/{number:int}")
async def show_version(
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    number: VersionNumber,
) -> VersionOut:
    return version_out(
        await service.get_version(session, principal.workspace_id, funnel_id, number)
    )


@post("/{funnel_id:int}/enroll", status_code=200)
async def enroll_contacts(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    job_queue: Queue,
    settings: CurrentSettings,
    funnel_id: FromPath[int],
    data: JSONBody[EnrollIn],
) -> Response[EnrollOut]:
    """The ``manual`` trigger: enter the listed contacts, or everyone matching a predicate.
    More contacts than one chunk are entered by a background job (``job``: its status, with
    ``started`` in its counters). A retry with the same ``Idempotency-Key`` answers the first
    count."""
    if data.contact_ids is None and data.predicate is None:
        raise ValidationFailed.field("contact_ids", "give contact_ids or a predicate")

    async def action(uow: UnitOfWork) -> EnrollOut:
        funnel = await service.get_funnel(uow.session, principal.workspace_id, funnel_id)
        version = await service.current_version(uow.session, funnel)
        if data.predicate is not None:
            await contact_fields.check_predicate(
                uow.session, principal.workspace_id, data.predicate, field="predicate"
            )
        entered = await start_enrolment(
            uow,
            job_queue,
            version,
            now=clock.now(),
            contact_ids=data.contact_ids,
            predicate=data.predicate,
            chunk_items=settings.bulk.chunk_items,
        )
        return EnrollOut(started=entered.started, job=job_url(entered.job))

    return await once(action, status_code=200)


@get("/{funnel_id:int}/runs")
async def list_runs(
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    paging: Paging,
    status: FromQuery[str | None] = None,
) -> Page[FunnelRunOut]:
    runs = await service.list_runs(
        session,
        principal.workspace_id,
        funnel_id,
        after=paging.after,
        limit=paging.fetch,
        status=status,
    )
    return page_of([run_out(r) for r in runs], paging.limit)


@get("/runs/{run_id:int}")
async def show_run(
    principal: CurrentPrincipal, session: Reads, run_id: FromPath[int]
) -> RunDetailOut:
    run = await service.get_run(session, principal.workspace_id, run_id)
    steps = await service.steps_of(session, run.id)
    effects = await service.effects_of_run(session, run.id)
    return RunDetailOut(
        run=run_out(run),
        steps=[step_out(s) for s in steps],
        effects=[effect_out(e) for e in effects],
    )


ROUTERS: list[Any] = [
    api_router(
        "/funnels",
        [
            show_frequency_cap,
            set_frequency_cap,
            create_contact,
            list_contacts,
            show_contact,
            update_contact,
            delete_contact,
            export_contact,
            import_contacts,
            contact_timeline,
            define_field,
            list_fields,
            create_tag,
            list_tags,
            create_list,
            list_lists,
            preview_segment,
            create_funnel,
            list_funnels,
            show_funnel,
            funnel_report,
            test_send,
            edit_funnel,
            validate_draft,
            publish,
            list_versions,
            show_version,
            enroll_contacts,
            list_runs,
            show_run,
        ],
        tag="funnels",
    )
]
