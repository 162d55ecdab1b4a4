"""Contacts and what describes them: typed custom fields, tags, lists, time zone, consent and
suppression per channel; CSV import with a per-row report; deletion that really ends things.

Changes that funnels react to (created, tag added, list joined) are recorded as contact events in
the same transaction; the trigger matcher picks them up after commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from app.db.dialect import insert, row_count
from app.db.session import ReadSession, WriteSession
from app.engines.funnels.erasure import erase_personal_data
from app.engines.funnels.errors import ContactNotFound, DuplicateContact
from app.engines.funnels.models import (
    OUTBOX_CANCELLED,
    OUTBOX_PENDING,
    RUN_ACTIVE,
    RUN_CANCELLED,
    Contact,
    ContactEvent,
    ContactList,
    ContactTag,
    DeliveryEvent,
    FieldDefinition,
    ListMember,
    OutboxEffect,
    Run,
    Tag,
)
from app.engines.funnels.segments import FIELD_TYPES, ContactFacts
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


# -- custom fields, tags, lists ----------------------------------------------------------------


async def field_types(session: ReadSession, workspace_id: int) -> dict[str, str]:
    rows = await session.execute(
        select(FieldDefinition.key, FieldDefinition.type).where(
            FieldDefinition.workspace_id == workspace_id
        )
    )
    return {k: t for k, t in rows.all()}


async def define_field(
    session: WriteSession, workspace_id: int, key: str, type_: str, label: str = ""
) -> FieldDefinition:
    if type_ not in FIELD_TYPES:
        raise ValidationFailed.field("type", f"must be one of {', '.join(FIELD_TYPES)}")
    if not key.isidentifier():
        raise ValidationFailed.field(
            "key", "letters, digits and underscores, not starting with a digit"
        )
    existing = await session.scalar(
        select(FieldDefinition).where(
            FieldDefinition.workspace_id == workspace_id, FieldDefinition.key == key
        )
    )
    if existing is not None:
        if existing.type != type_:
            raise ValidationFailed.field("type", f"field '{key}' already exists as {existing.type}")
        return existing
    definition = FieldDefinition(workspace_id=workspace_id, key=key, type=type_, label=label)
    session.add(definition)
    await session.flush()
    return definition


async def ensure_names(
    session: WriteSession,
    model: type[Tag] | type[ContactList],
    workspace_id: int,
    names: Iterable[str],
) -> dict[str, int]:
    """Ids of the named tags or lists, creating the missing ones (safe under concurrency)."""
    wanted = sorted({n.strip() for n in names if n.strip()})
    found: dict[str, int] = {}
    for piece in _pieces(wanted):
        # A list of parameters (executemany) rather than .values([...]): SQLAlchemy caches the
        # statement and batches the rows itself, where a multi-row VALUES is compiled anew.
        await session.execute(
            insert(session, model.__table__).on_conflict_do_nothing(),
            [{"workspace_id": workspace_id, "name": n} for n in piece],
        )
        rows = await session.execute(
            select(model.name, model.id).where(
                model.workspace_id == workspace_id, model.name.in_(piece)
            )
        )
        found.update({name: id_ for name, id_ in rows.all()})
    return found


STATEMENT_ROWS = 500
"""Rows per multi-row statement: well under SQLite's limit of bound variables per statement."""


def _pieces(items: Sequence[Any], size: int = STATEMENT_ROWS) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def names_of(
    session: ReadSession, model: type[Tag] | type[ContactList], workspace_id: int
) -> list[str]:
    rows = await session.scalars(
        select(model.name).where(model.workspace_id == workspace_id).order_by(model.name)
    )
    return list(rows)


def check_field_value(key: str, kind: str, value: Any) -> Any:
    """The value as stored, or ValidationFailed naming ``fields.<key>``."""
    if value is None:
        return None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationFailed.field(f"fields.{key}", "must be a number")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ValidationFailed.field(f"fields.{key}", "must be true or false")
        return value
    if kind == "date":
        if not isinstance(value, str):
            raise ValidationFailed.field(f"fields.{key}", "must be a date (YYYY-MM-DD)")
        try:
            datetime.strptime(value, "%Y-%m-%d")  # noqa: DTZ007 - a calendar date
        except ValueError:
            raise ValidationFailed.field(f"fields.{key}", "must be a date (YYYY-MM-DD)") from None
        return value
    if not isinstance(value, str):
        raise ValidationFailed.field(f"fields.{key}", "must be text")
    return value


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


async def record_event(
    session: WriteSession,
    *,
    workspace_id: int,
    contact_id: int,
    name: str,
    source: str,
    now: datetime,
    occurred_at: datetime | None = None,
    external_id: str | None = None,
    properties: Mapping[str, Any] | None = None,
) -> int | None:
    """Store an event; returns its id, or ``None`` when ``external_id`` was seen before."""
    stmt = (
        insert(session, ContactEvent)
        .values(
            workspace_id=workspace_id,
            contact_id=contact_id,
            name=name,
            source=source,
            external_id=external_id,
            properties=dict(properties or {}),
            occurred_at=occurred_at or now,
            created_at=now,
        )
        .on_conflict_do_nothing()
        .returning(ContactEvent.id)
    )
    event_id: int | None = await session.scalar(stmt)
    return event_id


MAX_TAGS_PER_CONTACT = 500
"""Tags one contact may hold: beyond this, a request or an import row is refused (422)."""
MAX_LISTS_PER_CONTACT = 500
"""Lists one contact may be on."""
MAX_NAME_CHARS = 100
"""Longest tag or list name (the column's width)."""


@dataclass(frozen=True, slots=True)
class Membership:
    """Tags or lists: the same many-to-many shape, told apart by these names."""

    model: type[Tag] | type[ContactList]
    link: type[ContactTag] | type[ListMember]
    link_column: str
    time_column: str
    event: str
    noun: str
    field: str
    limit: int


TAGS = Membership(
    Tag, ContactTag, "tag_id", "created_at", "tag_added", "tag", "tags", MAX_TAGS_PER_CONTACT
)
LISTS = Membership(
    ContactList,
    ListMember,
    "list_id",
    "joined_at",
    "list_join",
    "list",
    "lists",
    MAX_LISTS_PER_CONTACT,
)


def clean_names(names: Iterable[str]) -> list[str]:
    """Distinct, trimmed, non-empty names in their first order."""
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def names_problem(kind: Membership, names: Sequence[str]) -> str | None:
    """Why a contact may not be given these names (too many, too long), or ``None``."""
    if len(names) > kind.limit:
        return f"a contact holds at most {kind.limit} {kind.field} ({len(names)} given)"
    for name in names:
        if len(name) > MAX_NAME_CHARS:
            return f"{kind.noun} names are at most {MAX_NAME_CHARS} characters"
    return None


async def over_limit(
    session: ReadSession, kind: Membership, wanted: Mapping[int, Sequence[str]]
) -> dict[int, int]:
    """Contacts that would hold more than ``kind.limit`` tags (or lists) after adding ``wanted``
    to what they have: contact id -> the count they would reach."""
    ids = sorted(c for c, names in wanted.items() if names)
    if not ids:
        return {}
    link_column = getattr(kind.link, kind.link_column)
    current: dict[int, int] = {}
    already: dict[int, set[str]] = {}
    names = sorted({n for c in ids for n in wanted[c]})
    for piece in _pieces(ids):
        for cid, count in (
            await session.execute(
                select(kind.link.contact_id, func.count())
                .where(kind.link.contact_id.in_(piece))
                .group_by(kind.link.contact_id)
            )
        ).all():
            current[cid] = int(count)
        for name_piece in _pieces(names):
            for cid, name in (
                await session.execute(
                    select(kind.link.contact_id, kind.model.name)
                    .join(kind.model, kind.model.id == link_column)
                    .where(kind.link.contact_id.in_(piece), kind.model.name.in_(name_piece))
                )
            ).all():
                already.setdefault(cid, set()).add(name)
    reached = {c: current.get(c, 0) + len(set(wanted[c]) - already.get(c, set())) for c in ids}
    return {c: n for c, n in reached.items() if n > kind.limit}


async def add_memberships(
    session: WriteSession,
    workspace_id: int,
    kind: Membership,
    wanted: Mapping[int, Sequence[str]],
    now: datetime,
) -> int:
    """Give each contact the named tags (or lists), creating missing names, and record
    ``tag_added`` / ``list_join`` for each one new to its contact. A few statements however many
    contacts and names. Returns how many memberships were new."""
    ids = await ensure_names(
        session, kind.model, workspace_id, [n for names in wanted.values() for n in names]
    )
    pairs = list(
        dict.fromkeys(
            (cid, ids[name.strip()])
            for cid, names in wanted.items()
            for name in names
            if name.strip() in ids
        )
    )
    if not pairs:
        return 0
    added: list[tuple[int, int]] = []
    for piece in _pieces(pairs):
        table = kind.link.__table__
        rows = await session.execute(
            insert(session, table)
            .on_conflict_do_nothing()
            .returning(table.c.contact_id, table.c[kind.link_column]),
            [
                {"contact_id": cid, kind.link_column: ref, kind.time_column: now}
                for cid, ref in piece
            ],
        )
        added.extend((int(c), int(r)) for c, r in rows.all())
    name_of = {ref: name for name, ref in ids.items()}
    # Events in the order the names were given, as if added one by one.
    order = {pair: i for i, pair in enumerate(pairs)}
    added.sort(key=lambda pair: order.get(pair, 0))
    for piece in _pieces(added):
        await session.execute(
            insert(session, ContactEvent.__table__),
            [
                {
                    "workspace_id": workspace_id,
                    "contact_id": cid,
                    "name": kind.event,
                    "source": "system",
                    "external_id": None,
                    "properties": {kind.noun: name_of[ref]},
                    "occurred_at": now,
                    "created_at": now,
                }
                for cid, ref in piece
            ],
        )
    return len(added)


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


async def add_tag(
    session: WriteSession, contact: Contact, tag: str, now: datetime, *, tag_id: int | None = None
) -> bool:
    """Tag ``contact``; records ``tag_added`` when the tag is new to it. True when added."""
    if tag_id is None:
        tag_id = (await ensure_names(session, Tag, contact.workspace_id, [tag]))[tag]
    result = await session.execute(
        insert(session, ContactTag)
        .values(contact_id=contact.id, tag_id=tag_id, created_at=now)
        .on_conflict_do_nothing()
    )
    if not row_count(result):
        return False
    await record_event(
        session,
        workspace_id=contact.workspace_id,
        contact_id=contact.id,
        name="tag_added",
        source="system",
        now=now,
        properties={"tag": tag},
    )
    return True


async def remove_tag(session: WriteSession, contact: Contact, tag: str) -> bool:
    tag_id = await session.scalar(
        select(Tag.id).where(Tag.workspace_id == contact.workspace_id, Tag.name == tag)
    )
    if tag_id is None:
        return False
    result = await session.execute(
        delete(ContactTag)
        .execution_options(synchronize_session=False)
        .where(ContactTag.contact_id == contact.id, ContactTag.tag_id == tag_id)
    )
    return bool(row_count(result))


async def add_to_list(
    session: WriteSession, contact: Contact, name: str, now: datetime, *, list_id: int | None = None
) -> bool:
    if list_id is None:
        list_id = (await ensure_names(session, ContactList, contact.workspace_id, [name]))[name]
    result = await session.execute(
        insert(session, ListMember)
        .values(list_id=list_id, contact_id=contact.id, joined_at=now)
        .on_conflict_do_nothing()
    )
    if not row_count(result):
        return False
    await record_event(
        session,
        workspace_id=contact.workspace_id,
        contact_id=contact.id,
        name="list_join",
        source="system",
        now=now,
        properties={"list": name},
    )
    return True


async def remove_from_list(session: WriteSession, contact: Contact, name: str) -> bool:
    list_id = await session.scalar(
        select(ContactList.id).where(
            ContactList.workspace_id == contact.workspace_id, ContactList.name == name
        )
    )
    if list_id is None:
        return False
    result = await session.execute(
        delete(ListMember)
        .execution_options(synchronize_session=False)
        .where(ListMember.contact_id == contact.id, ListMember.list_id == list_id)
    )
    return bool(row_count(result))


async def delete_contact(
    session: WriteSession,
    workspace_id: int,
    contact_id: int,
    now: datetime,
    *,
    address_key: bytes | None = None,
) -> None:
    """Erase the contact's personal data, end its runs and cancel every pending effect addressed
    to it, in one transaction (hard case 5: a deletion that leaves a sequence is not one).

    With ``address_key`` (the instance key derived for
    :data:`~app.engines.funnels.erased_addresses.PURPOSE`), a suppressed address's suppression is
    kept under its keyed hash, so the address is not mailed again if it comes back."""
    contact = await get_contact(session, workspace_id, contact_id)
    if address_key is not None:
        from app.engines.funnels.erased_addresses import remember

        await remember(session, address_key, contact, now)
    contact.deleted_at = now
    contact.updated_at = now
    contact.email = None
    contact.phone = None
    contact.first_name = ""
    contact.last_name = ""
    contact.fields = {}
    contact.timezone = "UTC"
    await session.execute(
        delete(ContactTag)
        .execution_options(synchronize_session=False)
        .where(ContactTag.contact_id == contact_id)
    )
    await session.execute(
        delete(ListMember)
        .execution_options(synchronize_session=False)
        .where(ListMember.contact_id == contact_id)
    )
    await end_runs_of_contact(session, contact_id, now, reason="contact_deleted")
    await erase_personal_data(session, contact_id)


async def end_runs_of_contact(
    session: WriteSession, contact_id: int, now: datetime, *, reason: str
) -> None:
    await session.execute(
        update(Run)
        .execution_options(synchronize_session=False)
        .where(Run.contact_id == contact_id, Run.status == RUN_ACTIVE)
        .values(
            status=RUN_CANCELLED,
            wake_at=None,
            lease_owner=None,
            lease_until=None,
            ended_at=now,
            updated_at=now,
            exit_reason=reason,
        )
    )
    await cancel_pending_effects(session, now, reason=reason, contact_id=contact_id)


async def cancel_pending_effects(
    session: WriteSession,
    now: datetime,
    *,
    reason: str,
    contact_id: int | None = None,
    run_id: int | None = None,
) -> int:
    """Cancel the not-yet-delivered effects of a contact or of a run, recording why."""
    conditions = [OutboxEffect.status == OUTBOX_PENDING]
    if contact_id is not None:
        conditions.append(OutboxEffect.contact_id == contact_id)
    if run_id is not None:
        conditions.append(OutboxEffect.run_id == run_id)
    rows = (
        await session.execute(
            update(OutboxEffect)
            .execution_options(synchronize_session=False)
            .where(*conditions)
            .values(status=OUTBOX_CANCELLED, finished_at=now, last_error=reason, lease_owner=None)
            .returning(OutboxEffect.id, OutboxEffect.workspace_id, OutboxEffect.contact_id)
        )
    ).all()
    if rows:
        await session.execute(
            insert(session, DeliveryEvent),
            [
                {
                    "workspace_id": ws,
                    "outbox_id": oid,
                    "contact_id": cid,
                    "kind": "cancelled",
                    "detail": reason,
                    "at": now,
                }
                for oid, ws, cid in rows
            ],
        )
    return len(rows)


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


async def memberships(
    session: ReadSession, contact_ids: Sequence[int]
) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """Tag names and list names per contact."""
    tags: dict[int, list[str]] = {c: [] for c in contact_ids}
    lists: dict[int, list[str]] = {c: [] for c in contact_ids}
    if not contact_ids:
        return tags, lists
    for cid, name in (
        await session.execute(
            select(ContactTag.contact_id, Tag.name)
            .join(Tag, Tag.id == ContactTag.tag_id)
            .where(ContactTag.contact_id.in_(contact_ids))
            .order_by(Tag.name)
        )
    ).all():
        tags[cid].append(name)
    for cid, name in (
        await session.execute(
            select(ListMember.contact_id, ContactList.name)
            .join(ContactList, ContactList.id == ListMember.list_id)
            .where(ListMember.contact_id.in_(contact_ids))
            .order_by(ContactList.name)
        )
    ).all():
        lists[cid].append(name)
    return tags, lists


async def load_facts(
    session: ReadSession,
    contacts: Sequence[Contact],
    *,
    event_names: set[str],
    since: datetime | None,
) -> dict[int, ContactFacts]:
    """Facts for predicate evaluation, for many contacts in a few queries."""
    ids = [c.id for c in contacts]
    tags, lists = await memberships(session, ids)
    events: dict[int, list[tuple[str, datetime]]] = {c: [] for c in ids}
    if event_names and ids:
        stmt = select(ContactEvent.contact_id, ContactEvent.name, ContactEvent.occurred_at).where(
            ContactEvent.contact_id.in_(ids), ContactEvent.name.in_(sorted(event_names))
        )
        if since is not None:
            stmt = stmt.where(ContactEvent.occurred_at >= since)
        for cid, name, at in (await session.execute(stmt)).all():
            events[cid].append((name, at))
    return {c.id: facts_of(c, tags[c.id], lists[c.id], events[c.id]) for c in contacts}


def facts_of(
    contact: Contact,
    tags: Iterable[str],
    lists: Iterable[str],
    events: Iterable[tuple[str, datetime]],
) -> ContactFacts:
    return ContactFacts(
        attributes={
            "email": contact.email,
            "phone": contact.phone,
            "first_name": contact.first_name,
            "last_name": contact.last_name,
            "timezone": contact.timezone,
        },
        fields=dict(contact.fields or {}),
        tags=frozenset(tags),
        lists=frozenset(lists),
        events=tuple(events),
    )


def facts_window(now: datetime, days: int | None) -> datetime | None:
    return None if days is None else now - timedelta(days=days)
