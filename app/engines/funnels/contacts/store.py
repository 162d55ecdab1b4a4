"""Creating, reading, updating and listing contacts: their own data checked (custom field values
by type, widths, time zone, consent and suppression per channel), tags and lists given with them.

A new contact is recorded as the contact event ``contact_created`` in the same transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from app.db import keyset
from app.db.dialect import insert
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.events import (
    ROWS_PER_STATEMENT,
    event_row,
    record_event,
    record_events,
)
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


def normal_email(email: str) -> str:
    """An e-mail address as stored and looked up."""
    return email.strip().lower()


def duplicate_contact(email: str | None) -> DuplicateContact:
    return DuplicateContact(f"a contact with e-mail {email} already exists")


def contact_row(
    workspace_id: int, data: ContactData, fields: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """The new contact's row: ``data`` checked by :func:`check_contact`, which gave ``fields``."""
    return {
        "workspace_id": workspace_id,
        "email": (data.email or None) and normal_email(data.email),
        "phone": data.phone or None,
        "first_name": data.first_name or "",
        "last_name": data.last_name or "",
        "timezone": data.timezone or "UTC",
        "fields": dict(fields),
        "consent": dict(data.consent or {}),
        "suppressed": dict(data.suppressed or {}),
        "created_at": now,
        "updated_at": now,
    }


async def create_contact(
    session: WriteSession, workspace_id: int, data: ContactData, now: datetime
) -> Contact:
    types = await field_types(session, workspace_id)
    contact = Contact(**contact_row(workspace_id, data, check_contact(data, types), now))
    try:
        async with session.begin_nested():
            session.add(contact)
            await session.flush()
    except IntegrityError:
        raise duplicate_contact(contact.email) from None
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
        scoped_select(Contact, workspace_id).where(
            Contact.id == contact_id, Contact.deleted_at.is_(None)
        )
    )
    if contact is None:
        raise ContactNotFound(f"contact {contact_id} not found")
    return contact


async def find_by_email(session: ReadSession, workspace_id: int, email: str) -> Contact | None:
    return await session.scalar(
        scoped_select(Contact, workspace_id).where(
            Contact.email == normal_email(email), Contact.deleted_at.is_(None)
        )
    )


# -- many contacts at once (applying a batch of stored events) -------------------------------

EmailKey = tuple[int, str]
"""A workspace and an e-mail address as :func:`normal_email` gives it."""

_CONTACTS = Contact.__table__
"""Statements on the table, not the entity: the rows need no ORM (which costs about a
millisecond a statement here)."""


async def live_contacts(
    session: ReadSession, keys: Collection[tuple[int, int]]
) -> set[tuple[int, int]]:
    """Which of these (workspace, contact id) name a contact of that workspace that is not
    deleted (:func:`get_contact`'s test, for many), in a statement per 500 ids."""
    wanted = set(keys)
    ids = sorted({contact_id for _ws, contact_id in wanted})
    found: set[tuple[int, int]] = set()
    for start in range(0, len(ids), ROWS_PER_STATEMENT):
        rows = await session.execute(
            select(_CONTACTS.c.workspace_id, _CONTACTS.c.id).where(
                _CONTACTS.c.id.in_(ids[start : start + ROWS_PER_STATEMENT]),
                _CONTACTS.c.deleted_at.is_(None),
            )
        )
        found.update(key for ws, i in rows if (key := (int(ws), int(i))) in wanted)
    return found


async def contact_ids_by_email(
    session: ReadSession, keys: Collection[EmailKey]
) -> dict[EmailKey, int]:
    """The live contact of each (workspace, normalised e-mail) that has one
    (:func:`find_by_email` for many), in a statement per 500 addresses."""
    wanted = set(keys)
    emails = sorted({email for _ws, email in wanted})
    workspaces = sorted({ws for ws, _email in wanted})
    found: dict[EmailKey, int] = {}
    for start in range(0, len(emails), ROWS_PER_STATEMENT):
        rows = await session.execute(
            select(_CONTACTS.c.id, _CONTACTS.c.workspace_id, _CONTACTS.c.email).where(
                _CONTACTS.c.workspace_id.in_(workspaces),
                _CONTACTS.c.email.in_(emails[start : start + ROWS_PER_STATEMENT]),
                _CONTACTS.c.deleted_at.is_(None),
            )
        )
        for contact_id, ws, email in rows:
            if (key := (int(ws), str(email))) in wanted:
                found[key] = int(contact_id)
    return found


async def create_contacts(
    session: WriteSession, rows: Sequence[Mapping[str, Any]], now: datetime
) -> dict[EmailKey, int]:
    """Insert new contacts (rows of :func:`contact_row`, each with an e-mail, none twice, no tags
    or lists) and record each as ``contact_created``, as :func:`create_contact` does, in a
    statement for each; (workspace, e-mail) → id of each inserted.

    A row whose e-mail a live contact of its workspace has already (created by a concurrent
    transaction a moment ago) is skipped and missing from the answer: the caller finds that
    contact instead, as :func:`create_contact`'s callers do on :class:`DuplicateContact`."""
    created: dict[EmailKey, int] = {}
    if rows:
        # Run as executemany, which SQLAlchemy sends as multi-row inserts ("insertmanyvalues",
        # for RETURNING), on the table: compiled once, and not looked at again by the ORM.
        result = await session.execute(
            insert(session, _CONTACTS)
            .on_conflict_do_nothing()
            .returning(_CONTACTS.c.id, _CONTACTS.c.workspace_id, _CONTACTS.c.email),
            [dict(row) for row in rows],
        )
        for contact_id, ws, email in result:
            created[(int(ws), str(email))] = int(contact_id)
    await record_events(
        session,
        [
            event_row(
                workspace_id=ws,
                contact_id=contact_id,
                name="contact_created",
                source="system",
                now=now,
            )
            for (ws, _email), contact_id in sorted(created.items(), key=lambda item: item[1])
        ],
    )
    return created


async def update_contact(
    session: WriteSession, workspace_id: int, contact_id: int, data: ContactData, now: datetime
) -> Contact:
    contact = await get_contact(session, workspace_id, contact_id)
    types = await field_types(session, workspace_id)
    fields = check_contact(data, types)
    if data.email is not None:
        contact.email = normal_email(data.email) or None
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
        raise duplicate_contact(email) from None
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
            keep = scoped_select(kind.model, ws, kind.model.id).where(kind.model.name.in_(names))
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
    stmt = scoped_select(Contact, workspace_id).where(Contact.deleted_at.is_(None))
    if after is not None:
        stmt = stmt.where(keyset.after(Contact.id, after))
    if tag:
        stmt = stmt.where(
            Contact.id.in_(
                scoped_select(Tag, workspace_id, ContactTag.contact_id)
                .join(Tag, Tag.id == ContactTag.tag_id)
                .where(Tag.name == tag)
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
