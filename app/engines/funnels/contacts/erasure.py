"""Deleting a contact erases what we stored about them, everywhere; an export answers an access
request with everything stored about one contact (FN-33).

Both walk the personal-data registry (:mod:`app.engines.funnels.contacts.personal_data`): the
rows of each declared table are found for the person the way the registry says (by contact id,
through a parent row, by the address inside a text or JSON column, inside a sealed answer) and
either emptied of their personal columns or, for what is only a link or a cache, removed. The
export is taken from the same rows, the unlinked ones included.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Table, Text, case, cast, delete, or_, select, tuple_, update

from app.db.session import ReadSession, WriteSession
from app.engines.funnels.contacts.personal_data import REGISTRY, Entry, IfNamed, erased_value
from app.engines.funnels.contacts.personal_match import (
    ByContact,
    ByParent,
    Person,
    Sealed,
    open_sealed,
)
from app.engines.funnels.models import Contact
from app.platform.audit.append_only import unlocked
from app.platform.crypto import SecretBox

_CHUNK = 500
"""Rows per statement when erasing rows found one by one (bounded IN lists)."""


def person_of(contact: Contact, box: SecretBox | None = None) -> Person:
    """The identity to search for, read from the contact row (before it is erased)."""
    return Person(contact.workspace_id, contact.id, contact.email, contact.phone, box)


def _by_sql_alone(entry: Entry) -> bool:
    """The database finds these rows without reading them (no address to confirm)."""
    return isinstance(entry.find, ByContact | ByParent)


async def _found_rows(session: ReadSession, entry: Entry, person: Person) -> list[dict[str, Any]]:
    table = entry.table
    stmt = select(table).where(entry.find.where(table, person))
    stmt = stmt.order_by(*table.primary_key.columns)
    rows = [dict(r) for r in (await session.execute(stmt)).mappings()]
    if _by_sql_alone(entry):
        return rows
    return [r for r in rows if entry.find.confirms(r, person)]


def _keys_in(entry: Entry, rows: list[dict[str, Any]]) -> ColumnElement[bool]:
    pk = list(entry.table.primary_key.columns)
    if len(pk) == 1:
        return pk[0].in_([r[pk[0].name] for r in rows])
    return tuple_(*pk).in_([tuple(r[c.name] for c in pk) for r in rows])


async def _erase_entry(session: WriteSession, entry: Entry, person: Person) -> None:
    table = entry.table
    if entry.erased is not None and not entry.erased:
        return  # linked rows without personal columns: kept as they are
    if _by_sql_alone(entry):
        wheres = [entry.find.where(table, person)]
    else:
        found = await _found_rows(session, entry, person)
        wheres = [_keys_in(entry, found[i : i + _CHUNK]) for i in range(0, len(found), _CHUNK)]
    for where in wheres:
        if entry.erased is None:
            await session.execute(delete(table).where(where))
        else:
            values = {c: _emptied(table, c, v, person) for c, v in entry.erased.items()}
            await session.execute(update(table).where(where).values(values))


def _emptied(table: Table, column: str, value: Any, person: Person) -> Any:
    if not isinstance(value, IfNamed):
        return erased_value(value, person)
    current = table.c[column]
    patterns = person.like_patterns()
    if not patterns:
        return current
    naming = or_(*(cast(current, Text).ilike(p, escape="\\") for p in patterns))
    return case((naming, value.value), else_=current)


async def erase_personal_data(session: WriteSession, person: Person) -> None:
    """Empty every stored trace of the person, table by table as the registry declares them
    (called by ``delete_contact`` in its transaction, before the contact row itself is
    emptied: the unlinked rows are found by the address it still holds)."""
    contact_entries = [e for e in REGISTRY if e.single]
    # The audit log is append-only; redacting an address in it is the one change it takes.
    async with unlocked(session):
        for entry in [e for e in REGISTRY if not e.single] + contact_entries:
            await _erase_entry(session, entry, person)


async def _labels(session: ReadSession, entry: Entry, rows: list[dict[str, Any]]) -> None:
    label = entry.label
    if label is None or not rows:
        return
    ids = {r[label.column] for r in rows}
    stmt = select(label.parent.c.id, label.parent.c[label.field]).where(label.parent.c.id.in_(ids))
    names = {key: name for key, name in await session.execute(stmt)}
    for row in rows:
        row[label.as_] = names.get(row[label.column])


async def export_person(session: ReadSession, person: Person) -> dict[str, Any]:
    """Everything stored about the person, by the registry's sections, as JSON-ready data."""
    out: dict[str, Any] = {}
    for entry in REGISTRY:
        rows = await _found_rows(session, entry, person)
        if isinstance(entry.find, Sealed):
            for row in rows:
                row[entry.find.column] = open_sealed(person, row[entry.find.column])
        await _labels(session, entry, rows)
        out[entry.section] = (rows[0] if rows else None) if entry.single else rows
    return out


async def export_contact(
    session: ReadSession, contact: Contact, box: SecretBox | None = None
) -> dict[str, Any]:
    """Everything stored about one contact (an access request's answer), the rows that name
    their address without being linked to them included."""
    return await export_person(session, person_of(contact, box))
