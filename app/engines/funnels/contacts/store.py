"""Creating, reading, updating and listing contacts: their own data checked (custom field values
by type, widths, time zone, consent and suppression per channel), tags and lists given with them.

A new contact is recorded as the contact event ``contact_created`` in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from app.db.session import ReadSession, WriteSession
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.contacts.fields import check_field_value, field_types
from app.engines.funnels.contacts.memberships import (
    LISTS,
    TAGS,
    add_memberships,
    clean_names,
    names_problem,
    over_limit,
)
from app.engines.funnels.errors import ContactNotFound, DuplicateContact
from app.engines.funnels.models import (
    Contact,
    ContactTag,
    Tag,
)
from app.errors import ValidationFailed
from app.scheduling.zones import is_known_zone

CHANNELS = ("email", "sms", "push", "letter")
CONSENT_VALUES = ("granted", "withdrawn")


@dataclass(frozen=True, slots=True)
class ContactData:
    """Validated input for creating or updating a contact (``None``: leave unchanged)."""

    email: str | None = None
    phone: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    timezone: str | None = None
    fields: Mapping[str, Any] | None = None
    tags: Sequence[str] | None = None
    lists: Sequence[str] | None = None
    consent: Mapping[str, str] | None = None
    suppressed: Mapping[str, str] | None = None


def check_contact(data: ContactData, types: Mapping[str, str]) -> dict[str, Any]:
    """The custom field values as stored, or ValidationFailed naming the field."""
    fields: dict[str, Any] = {}
    for key, value in (data.fields or {}).items():
        if key not in types:
            raise ValidationFailed.field(f"fields.{key}", "no such custom field in this workspace")
        fields[key] = check_field_value(key, types[key], value)
    for name, value, width in (
        ("email", data.email, 320),
        ("phone", data.phone, 40),
        ("first_name", data.first_name, 200),
        ("last_name", data.last_name, 200),
    ):
        if value is not None and len(value) > width:
            raise ValidationFailed.field(name, f"at most {width} characters", code="too_long")
    if data.timezone is not None and not is_known_zone(data.timezone):
        raise ValidationFailed.field("timezone", f"unknown time zone '{data.timezone}'")
    if data.email is not None and data.email and "@" not in data.email:
        raise ValidationFailed.field("email", "not an e-mail address")
    for channel, value in (data.consent or {}).items():
        if channel not in CHANNELS or value not in CONSENT_VALUES:
            raise ValidationFailed.field(
                f"consent.{channel}", f"channel one of {CHANNELS}, value one of {CONSENT_VALUES}"
            )
    for channel in data.suppressed or {}:
        # ``topic:<name>`` records that the contact left one topic of e-mail (see unsubscribe).
        if channel not in CHANNELS and not (channel.startswith("topic:") and len(channel) > 6):
            raise ValidationFailed.field(
                f"suppressed.{channel}", f"channel one of {CHANNELS}, or topic:<name>"
            )
    return fields


async def create_contact(
    session: WriteSession, workspace_id: int, data: ContactData, now: datetime
) -> Contact:
    types = await field_types(session, workspace_id)
    fields = check_contact(data, types)
    contact = Contact(
        workspace_id=workspace_id,
        email=(data.email or None) and data.email.strip().lower(),
        phone=data.phone or None,
        first_name=data.first_name or "",
        last_name=data.last_name or "",
        timezone=data.timezone or "UTC",
        fields=fields,
        consent=dict(data.consent or {}),
        suppressed=dict(data.suppressed or {}),
        created_at=now,
        updated_at=now,
    )
    try:
        async with session.begin_nested():
            session.add(contact)
            await session.flush()
    except IntegrityError:
        raise DuplicateContact(f"a contact with e-mail {contact.email} already exists") from None
    await record_event(
        session,
        workspace_id=workspace_id,
        contact_id=contact.id,
        name="contact_created",
        source="system",
        now=now,
    )
    await _apply_memberships(session, contact, data, now, replace=False)
    return contact


async def get_contact(session: ReadSession, workspace_id: int, contact_id: int) -> Contact:
    contact = await session.scalar(
        select(Contact).where(
            Contact.id == contact_id,
            Contact.workspace_id == workspace_id,
            Contact.deleted_at.is_(None),
        )
    )
    if contact is None:
        raise ContactNotFound(f"contact {contact_id} not found")
    return contact


async def find_by_email(session: ReadSession, workspace_id: int, email: str) -> Contact | None:
    return await session.scalar(
        select(Contact).where(
            Contact.workspace_id == workspace_id,
            Contact.email == email.strip().lower(),
            Contact.deleted_at.is_(None),
        )
    )


async def update_contact(
    session: WriteSession, workspace_id: int, contact_id: int, data: ContactData, now: datetime
) -> Contact:
    contact = await get_contact(session, workspace_id, contact_id)
    types = await field_types(session, workspace_id)
    fields = check_contact(data, types)
    if data.email is not None:
        contact.email = data.email.strip().lower() or None
    if data.phone is not None:
        contact.phone = data.phone or None
    if data.first_name is not None:
        contact.first_name = data.first_name
    if data.last_name is not None:
        contact.last_name = data.last_name
    if data.timezone is not None:
        contact.timezone = data.timezone
    if data.fields is not None:
        contact.fields = {**contact.fields, **fields}
    if data.consent is not None:
        contact.consent = {**contact.consent, **data.consent}
    if data.suppressed is not None:
        contact.suppressed = dict(data.suppressed)
    contact.updated_at = now
    email = contact.email  # a failed flush expires the row: reading it then would raise
    try:
        async with session.begin_nested():
            await session.flush()
    except IntegrityError:
        raise DuplicateContact(f"a contact with e-mail {email} already exists") from None
    await _apply_memberships(session, contact, data, now, replace=True)
    return contact


async def _apply_memberships(
    session: WriteSession, contact: Contact, data: ContactData, now: datetime, *, replace: bool
) -> None:
    ws = contact.workspace_id
    for kind, given in ((TAGS, data.tags), (LISTS, data.lists)):
        if given is None:
            continue
        names = clean_names(given)
        problem = names_problem(kind, names)
        if problem is not None:
            raise ValidationFailed.field(kind.field, problem, code="too_many")
        if replace:
            keep = select(kind.model.id).where(
                kind.model.workspace_id == ws, kind.model.name.in_(names)
            )
            await session.execute(
                delete(kind.link)
                .execution_options(synchronize_session=False)
                .where(
                    kind.link.contact_id == contact.id,
                    getattr(kind.link, kind.link_column).not_in(keep),
                )
            )
        elif (reached := await over_limit(session, kind, {contact.id: names})) and (
            contact.id in reached
        ):
            raise ValidationFailed.field(
                kind.field,
                f"a contact holds at most {kind.limit} {kind.field} "
                f"(this would make {reached[contact.id]})",
                code="too_many",
            )
        await add_memberships(session, ws, kind, {contact.id: names}, now)


async def list_contacts(
    session: ReadSession,
    workspace_id: int,
    *,
    after: int | None,
    limit: int,
    tag: str | None = None,
    search: str | None = None,
) -> list[Contact]:
    stmt = select(Contact).where(Contact.workspace_id == workspace_id, Contact.deleted_at.is_(None))
    if after is not None:
        stmt = stmt.where(Contact.id > after)
    if tag:
        stmt = stmt.where(
            Contact.id.in_(
                select(ContactTag.contact_id)
                .join(Tag, Tag.id == ContactTag.tag_id)
                .where(Tag.workspace_id == workspace_id, Tag.name == tag)
            )
        )
    if search:
        like = f"%{search.lower()}%"
        stmt = stmt.where(
            func.lower(func.coalesce(Contact.email, "")).like(like)
            | func.lower(Contact.first_name).like(like)
            | func.lower(Contact.last_name).like(like)
        )
    return list(await session.scalars(stmt.order_by(Contact.id).limit(limit)))
