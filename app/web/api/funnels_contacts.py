"""Funnels JSON API, the contacts side: contacts (with CSV import, export and erasure), the
frequency cap, custom fields, tags, lists and segment previews.

Registered under ``/funnels`` with the funnels themselves by :data:`app.web.api.funnels.ROUTERS`.
Controllers stay thin: a unit of work, a service call, the response shape. Every query is scoped
to the caller's workspace; another workspace's id answers 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Request, Response, delete, get, patch, post, put
from litestar.params import FromPath, FromQuery, JSONBody

from app.db.session import UnitOfWork
from app.engines.funnels import reads
from app.engines.funnels.contacts import deletion as contact_deletion
from app.engines.funnels.contacts import erased_addresses, erasure
from app.engines.funnels.contacts import fields as contact_fields
from app.engines.funnels.contacts import memberships as contact_memberships
from app.engines.funnels.contacts import store as contact_store
from app.engines.funnels.contacts.csv_import import start_import
from app.engines.funnels.definitions import service
from app.engines.funnels.events.work.segment_triggers import contacts_changed
from app.engines.funnels.models import ContactList, Tag
from app.engines.funnels.outbox.work import frequency
from app.engines.funnels.schemas import (
    ContactImportIn,
    ContactIn,
    ContactOut,
    FieldIn,
    FieldOut,
    FrequencyCapIn,
    FrequencyCapOut,
    NameIn,
    NamesOut,
    SegmentPreviewIn,
    SegmentPreviewOut,
    TimelineEntryOut,
    TimelineOut,
)
from app.errors import ValidationFailed
from app.pagination import Page, page_of
from app.platform import audit
from app.web.api.common import Once
from app.web.api.jobs import BulkJobOut, bulk_job_out
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, CurrentSettings, Paging, Queue, Reads, Secrets, Writes

# -- contacts ----------------------------------------------------------------------------------


async def _changed(
    uow: UnitOfWork, workspace_id: int, contact_ids: list[int], now: datetime
) -> None:
    """``segment_enter`` for the changed contacts, in the same unit of work (FN-10)."""
    await contacts_changed(uow.session, workspace_id=workspace_id, contact_ids=contact_ids, now=now)


@post("/contacts", status_code=201)
async def create_contact(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    data: JSONBody[ContactIn],
) -> Response[ContactOut]:
    """Create a contact (``Idempotency-Key`` makes a retried request create it once)."""

    async def action(uow: UnitOfWork) -> ContactOut:
        contact = await contact_store.create_contact(
            uow.session, principal.workspace_id, data.data(), clock.now()
        )
        await _changed(uow, principal.workspace_id, [contact.id], clock.now())
        return await reads.contact_view(uow.session, contact)

    return await once(action)


@get("/contacts")
async def list_contacts(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    tag: FromQuery[str | None] = None,
    q: FromQuery[str | None] = None,
) -> Page[ContactOut]:
    rows = await contact_store.list_contacts(
        session,
        principal.workspace_id,
        after=paging.after,
        limit=paging.fetch,
        tag=tag,
        search=q,
    )
    return page_of(await reads.contact_views(session, rows), paging.limit)


@get("/frequency-cap")
async def show_frequency_cap(principal: CurrentPrincipal, session: Reads) -> FrequencyCapOut:
    cap = await frequency.get_cap(session, principal.workspace_id)
    return FrequencyCapOut(per_day=cap.per_day, per_week=cap.per_week)


@put("/frequency-cap")
async def set_frequency_cap(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, data: JSONBody[FrequencyCapIn]
) -> FrequencyCapOut:
    """Set the workspace's frequency cap, checked when each message goes out."""
    cap = await frequency.set_cap(
        uow.session,
        principal.workspace_id,
        frequency.Cap(data.per_day, data.per_week),
        clock.now(),
    )
    return FrequencyCapOut(per_day=cap.per_day, per_week=cap.per_week)


@get("/contacts/{contact_id:int}")
async def show_contact(
    principal: CurrentPrincipal, session: Reads, contact_id: FromPath[int]
) -> ContactOut:
    contact = await contact_store.get_contact(session, principal.workspace_id, contact_id)
    return await reads.contact_view(session, contact)


@patch("/contacts/{contact_id:int}")
async def update_contact(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    contact_id: FromPath[int],
    data: JSONBody[ContactIn],
) -> ContactOut:
    """Change the given attributes; ``tags`` and ``lists``, when given, replace the sets."""
    contact = await contact_store.update_contact(
        uow.session, principal.workspace_id, contact_id, data.data(), clock.now()
    )
    await _changed(uow, principal.workspace_id, [contact.id], clock.now())
    out = await reads.contact_view(uow.session, contact)
    return out


@delete("/contacts/{contact_id:int}", status_code=204)
async def delete_contact(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    contact_id: FromPath[int],
) -> None:
    """Erase the contact's personal data, end its runs and cancel what was still to be sent."""
    await contact_deletion.delete_contact(
        uow.session,
        principal.workspace_id,
        contact_id,
        clock.now(),
        address_key=secrets.derive(erased_addresses.PURPOSE),
        box=secrets,
    )


@get("/contacts/{contact_id:int}/export")
async def export_contact(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    contact_id: FromPath[int],
) -> dict[str, Any]:
    """Everything stored about one contact (an access request's answer), one section per table
    of the personal-data registry: attributes, tags, lists, events and raw inbound payloads
    (those that named the address before it was a contact's, or about an unknown message,
    included), runs and their steps, messages with their content, effect results, delivery
    events, campaign receipts, stored idempotency answers and log lines naming them."""
    contact = await contact_store.get_contact(uow.session, principal.workspace_id, contact_id)
    exported = await erasure.export_contact(uow.session, contact, secrets)
    await audit.record(
        uow.session,
        action="contact.exported",
        object_type="contact",
        object_id=contact_id,
        workspace_id=principal.workspace_id,
        organisation_id=principal.organisation_id,
        now=clock.now(),
    )
    return exported


@post("/contacts/import", status_code=202)
async def import_contacts(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    job_queue: Queue,
    settings: CurrentSettings,
    data: JSONBody[ContactImportIn],
) -> Response[BulkJobOut]:
    """Create or update contacts (by e-mail) from CSV, in the background: answers 202 with the
    job; poll its ``url`` for progress and the per-row report. The header, the column mapping
    and the row count are checked first (422, nothing written). A retry with the same
    ``Idempotency-Key`` answers the same job and imports nothing twice."""

    async def action(uow: UnitOfWork) -> BulkJobOut:
        job = await start_import(
            uow,
            job_queue,
            workspace_id=principal.workspace_id,
            text=data.csv,
            columns=data.columns,
            max_rows=settings.bulk.max_import_rows,
            now=clock.now(),
        )
        return bulk_job_out(job, [])

    return await once(action, status_code=202)


@get("/contacts/{contact_id:int}/timeline")
async def contact_timeline(
    principal: CurrentPrincipal, session: Reads, contact_id: FromPath[int]
) -> TimelineOut:
    contact, entries = await service.timeline(session, principal.workspace_id, contact_id)
    out = await reads.contact_view(session, contact)
    return TimelineOut(
        contact=out,
        entries=[
            TimelineEntryOut(at=e.at, kind=e.kind, title=e.title, detail=e.detail, run_id=e.run_id)
            for e in entries
        ],
    )


# -- fields, tags, lists, segments -------------------------------------------------------------


@post("/fields", status_code=201)
async def define_field(
    principal: CurrentPrincipal, uow: Writes, data: JSONBody[FieldIn]
) -> FieldOut:
    f = await contact_fields.define_field(
        uow.session, principal.workspace_id, data.key, data.type, data.label
    )
    return FieldOut(key=f.key, type=f.type, label=f.label)


@get("/fields")
async def list_fields(principal: CurrentPrincipal, session: Reads) -> list[FieldOut]:
    rows = await reads.field_definitions(session, principal.workspace_id)
    return [FieldOut(key=f.key, type=f.type, label=f.label) for f in rows]


def _clean_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned or len(cleaned) > 100:
        raise ValidationFailed.field("name", "1 to 100 characters")
    return cleaned


@post("/tags", status_code=201)
async def create_tag(principal: CurrentPrincipal, uow: Writes, data: JSONBody[NameIn]) -> NamesOut:
    await contact_memberships.ensure_names(
        uow.session, Tag, principal.workspace_id, [_clean_name(data.name)]
    )
    names = await contact_memberships.names_of(uow.session, Tag, principal.workspace_id)
    return NamesOut(names=names)


@get("/tags")
async def list_tags(principal: CurrentPrincipal, session: Reads) -> NamesOut:
    return NamesOut(names=await contact_memberships.names_of(session, Tag, principal.workspace_id))


@post("/lists", status_code=201)
async def create_list(principal: CurrentPrincipal, uow: Writes, data: JSONBody[NameIn]) -> NamesOut:
    await contact_memberships.ensure_names(
        uow.session, ContactList, principal.workspace_id, [_clean_name(data.name)]
    )
    names = await contact_memberships.names_of(uow.session, ContactList, principal.workspace_id)
    return NamesOut(names=names)


@get("/lists")
async def list_lists(principal: CurrentPrincipal, session: Reads) -> NamesOut:
    return NamesOut(
        names=await contact_memberships.names_of(session, ContactList, principal.workspace_id)
    )


SEGMENT_SAMPLE = 20
"""Contact ids a segment preview lists."""


@post("/segments/preview", status_code=200)
async def preview_segment(
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    data: JSONBody[SegmentPreviewIn],
) -> SegmentPreviewOut:
    """How many contacts match a predicate now (the SQL side of FN-10)."""
    ws = principal.workspace_id
    custom = await contact_fields.check_predicate(session, ws, data.predicate, field="predicate")
    total, sample = await reads.segment_matches(
        session, ws, data.predicate, now=clock.now(), custom=custom, sample=SEGMENT_SAMPLE
    )
    return SegmentPreviewOut(count=total, sample=[contact_id for contact_id, _ in sample])
