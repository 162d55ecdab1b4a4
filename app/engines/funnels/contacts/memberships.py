"""Tags and lists: names created on first use (safe under concurrency), memberships added in a few
statements however many contacts, bounded per contact, and the events funnels react to
(``tag_added``, ``list_join``) recorded with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select

from app.db.dialect import insert, row_count
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
    ContactList,
    ContactTag,
    ListMember,
    Tag,
)


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
            scoped_select(model, workspace_id, model.name, model.id).where(model.name.in_(piece))
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
        scoped_select(model, workspace_id, model.name).order_by(model.name)
    )
    return list(rows)


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
        scoped_select(Tag, contact.workspace_id, Tag.id).where(Tag.name == tag)
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
        scoped_select(ContactList, contact.workspace_id, ContactList.id).where(
            ContactList.name == name
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


async def memberships(
    session: ReadSession, contact_ids: Sequence[int], *, tags: bool = True, lists: bool = True
) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """Tag names and list names per contact; with ``tags`` or ``lists`` false, that side is
    left empty without a query."""
    tag_names: dict[int, list[str]] = {c: [] for c in contact_ids}
    list_names: dict[int, list[str]] = {c: [] for c in contact_ids}
    if tags and contact_ids:
        await _tag_names(session, contact_ids, tag_names)
    if lists and contact_ids:
        await _list_names(session, contact_ids, list_names)
    return tag_names, list_names


async def _tag_names(
    session: ReadSession, contact_ids: Sequence[int], into: dict[int, list[str]]
) -> None:
    for cid, name in (
        await session.execute(
            select(ContactTag.contact_id, Tag.name)
            .join(Tag, Tag.id == ContactTag.tag_id)
            .where(ContactTag.contact_id.in_(contact_ids))
            .order_by(Tag.name)
        )
    ).all():
        into[cid].append(name)


async def _list_names(
    session: ReadSession, contact_ids: Sequence[int], into: dict[int, list[str]]
) -> None:
    for cid, name in (
        await session.execute(
            select(ListMember.contact_id, ContactList.name)
            .join(ContactList, ContactList.id == ListMember.list_id)
            .where(ListMember.contact_id.in_(contact_ids))
            .order_by(ContactList.name)
        )
    ).all():
        into[cid].append(name)
