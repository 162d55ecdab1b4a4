"""Contact pages that change things: add a contact, edit one (name, time zone, tags, lists, custom
fields) and enrol one in a published funnel. The forms post plain fields; they become the same
:class:`ContactData` the API takes, so a contact is valid in one place or in neither. An error names
the field by its label and the form comes back as it was typed."""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import quote

from litestar import Request, post
from litestar.datastructures import FormMultiDict
from litestar.params import FromPath
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.funnels import reads
from app.engines.funnels.contacts import memberships as contact_memberships
from app.engines.funnels.contacts import store as contact_store
from app.engines.funnels.contacts.store import ContactData
from app.engines.funnels.definitions import service
from app.engines.funnels.events.claim.triggers import enroll
from app.engines.funnels.models import FieldDefinition, FunnelVersion
from app.errors import DomainError, ValidationFailed
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import error_message, page
from app.web.deps import CurrentClock, Writes

CONTACTS = "/ui/funnels/contacts"
LABELS = {
    "email": "E-mail",
    "phone": "Phone",
    "first_name": "First name",
    "last_name": "Last name",
    "timezone": "Time zone",
    "tags": "Tags",
    "lists": "Lists",
    "funnel_id": "Funnel",
}


def field_label(definition: FieldDefinition) -> str:
    return definition.label or definition.key.replace("_", " ").capitalize()


def _names(raw: str) -> list[str]:
    return [part.strip() for part in raw.replace("\n", ",").split(",") if part.strip()]


def _field_value(definition: FieldDefinition, raw: str | None) -> Any:
    """A form's text as the field's type; a blank clears the value."""
    if definition.type == "boolean":
        return raw is not None
    text = (raw or "").strip()
    if not text:
        return None
    if definition.type == "number":
        try:
            return int(text) if text.lstrip("-").isdigit() else float(text)
        except ValueError:
            raise ValidationFailed.field(f"fields.{definition.key}", "must be a number") from None
    return text


def form_to_contact(form: FormMultiDict, definitions: list[FieldDefinition]) -> ContactData:
    fields = {d.key: _field_value(d, form.get(f"field_{d.key}")) for d in definitions}
    return ContactData(
        email=form.get("email", "").strip(),
        first_name=form.get("first_name", "").strip(),
        last_name=form.get("last_name", "").strip(),
        timezone=form.get("timezone", "").strip() or "UTC",
        fields=fields,
        tags=_names(form.get("tags", "")),
        lists=_names(form.get("lists", "")),
    )


def labels_for(definitions: list[FieldDefinition]) -> dict[str, str]:
    return {**LABELS, **{f"fields.{d.key}": field_label(d) for d in definitions}}


def _again(request: Any, template: Template, status: int = 422) -> Template:
    template.status_code = status
    return template


async def contacts_listing(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    *,
    q: str | None,
    add_error: str | None = None,
    add_form: dict[str, Any] | None = None,
) -> Template:
    """The contacts page: the search, the list, and the form to add one."""
    rows = await contact_store.list_contacts(
        session, principal.workspace_id, after=None, limit=200, search=q
    )
    tags, lists = await contact_memberships.memberships(session, [c.id for c in rows])
    definitions = await reads.field_definitions(session, principal.workspace_id)
    return page(
        request,
        "funnels/contacts.html",
        principal,
        contacts=rows,
        tags=tags,
        lists=lists,
        q=q,
        definitions=[(d, field_label(d)) for d in definitions],
        add_error=add_error,
        add_form=add_form,
    )


async def contact_detail(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    contact_id: int,
    *,
    edit_error: str | None = None,
    edit_form: dict[str, Any] | None = None,
    enrol_error: str | None = None,
) -> Template:
    """A contact's page: what it is, the form to edit it, enrolment, and its timeline."""
    contact, entries = await service.timeline(session, principal.workspace_id, contact_id)
    tags, lists = await contact_memberships.memberships(session, [contact.id])
    definitions = await reads.field_definitions(session, principal.workspace_id)
    funnels = [
        f
        for f in await service.list_funnels(session, principal.workspace_id)
        if f.current_version_id is not None
    ]
    values: dict[str, Any] = edit_form or {
        "email": contact.email or "",
        "first_name": contact.first_name,
        "last_name": contact.last_name,
        "timezone": contact.timezone,
        "tags": ", ".join(tags[contact.id]),
        "lists": ", ".join(lists[contact.id]),
        **{
            f"field_{d.key}": ""
            if contact.fields.get(d.key) is None
            else ("on" if contact.fields.get(d.key) is True else str(contact.fields[d.key]))
            for d in definitions
            if contact.fields.get(d.key) is not False
        },
    }
    return page(
        request,
        "funnels/timeline.html",
        principal,
        contact=contact,
        entries=entries,
        tags=tags[contact.id],
        lists=lists[contact.id],
        definitions=[(d, field_label(d)) for d in definitions],
        values=values,
        funnels=funnels,
        edit_error=edit_error,
        enrol_error=enrol_error,
        notice=request.query_params.get("notice"),
    )


@post(CONTACTS)
async def create_contact_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, uow: Writes, clock: CurrentClock
) -> Template | Redirect:
    form = await request.form()
    definitions = await reads.field_definitions(uow.session, principal.workspace_id)
    try:
        data = form_to_contact(form, definitions)
        async with uow.attempt():
            contact = await contact_store.create_contact(
                uow.session,
                principal.workspace_id,
                dataclasses.replace(
                    data,
                    fields={k: v for k, v in (data.fields or {}).items() if v not in (None, False)},
                ),
                clock.now(),
            )
    except DomainError as exc:
        return _again(
            request,
            await contacts_listing(
                request,
                principal,
                uow.session,
                q=None,
                add_error=error_message(exc, labels_for(definitions)),
                add_form=dict(form),
            ),
        )
    return Redirect(f"{CONTACTS}/{contact.id}?notice={quote('Contact added')}")


@post(f"{CONTACTS}/{{contact_id:int}}")
async def update_contact_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    contact_id: FromPath[int],
) -> Template | Redirect:
    form = await request.form()
    definitions = await reads.field_definitions(uow.session, principal.workspace_id)
    try:
        data = form_to_contact(form, definitions)
        async with uow.attempt():
            await contact_store.update_contact(
                uow.session, principal.workspace_id, contact_id, data, clock.now()
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return _again(
            request,
            await contact_detail(
                request,
                principal,
                uow.session,
                contact_id,
                edit_error=error_message(exc, labels_for(definitions)),
                edit_form=dict(form),
            ),
        )
    return Redirect(f"{CONTACTS}/{contact_id}?notice={quote('Contact saved')}")


@post(f"{CONTACTS}/{{contact_id:int}}/enrol")
async def enrol_contact_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    contact_id: FromPath[int],
) -> Template | Redirect:
    """Enter the contact in a published funnel's current version (the ``manual`` trigger)."""
    form = await request.form()
    raw = form.get("funnel_id", "")
    try:
        if not raw.isdigit():
            raise ValidationFailed.field("funnel_id", "choose a published funnel")
        async with uow.attempt():
            await contact_store.get_contact(uow.session, principal.workspace_id, contact_id)
            funnel = await service.get_funnel(uow.session, principal.workspace_id, int(raw))
            if funnel.current_version_id is None:
                raise ValidationFailed.field("funnel_id", f"“{funnel.name}” is not published yet")
            version = await uow.session.get(FunnelVersion, funnel.current_version_id)
            assert version is not None
            entered = await enroll(uow.session, version, now=clock.now(), contact_ids=[contact_id])
    except DomainError as exc:
        if exc.status == 404 and "contact" in exc.message:
            raise
        return _again(
            request,
            await contact_detail(
                request,
                principal,
                uow.session,
                contact_id,
                enrol_error=error_message(exc, LABELS),
            ),
        )
    notice = (
        f"Entered “{funnel.name}”"
        if entered
        else f"Not entered: already in “{funnel.name}” or kept out by its entry rules"
    )
    return Redirect(f"{CONTACTS}/{contact_id}?notice={quote(notice)}")


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [create_contact_page, update_contact_page, enrol_contact_page]
PUBLIC_ROUTES: list[Any] = []
