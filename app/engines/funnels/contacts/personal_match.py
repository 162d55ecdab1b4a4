"""How a stored row is recognised as naming one person, and how it is found: by the contact id,
by a parent row that is theirs, or by their address inside a text, a JSON document or a sealed
(encrypted) answer.

Used by the personal-data registry (:mod:`app.engines.funnels.contacts.personal_data`), which says
which of these finds the rows of each table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Table, Text, and_, cast, false, or_, select, tuple_

from app.platform.crypto import SecretBox, SecretBoxError

_PHONE_TAIL = 4
"""The last digits of a phone number the database pre-selects rows by (formatting differs)."""
_PHONE_MIN = 7
"""Fewer digits than this is not a phone number (an amount, a year, an id)."""


def _digits(value: str) -> str:
    return re.sub(r"\D", "", value)


@dataclass(frozen=True, slots=True)
class Person:
    """Who is being erased or exported: the contact row's identity, read before erasure."""

    workspace_id: int
    contact_id: int
    email: str | None
    phone: str | None
    box: SecretBox | None = None
    """Opens sealed answers (stored idempotency answers); without it they are not searched."""

    @property
    def address(self) -> str | None:
        return self.email.strip().lower() if self.email else None

    @property
    def phone_digits(self) -> str | None:
        digits = _digits(self.phone or "")
        return digits if len(digits) >= _PHONE_MIN else None

    def like_patterns(self) -> list[str]:
        """What the database pre-selects candidate rows by (confirmed by :meth:`names`)."""
        patterns = []
        if self.address:
            patterns.append(f"%{_escape(self.address)}%")
        if self.phone_digits:
            patterns.append(f"%{self.phone_digits[-_PHONE_TAIL:]}%")
        return patterns

    def names(self, value: Any) -> bool:
        """Whether a stored value (text, JSON document, nested) carries the person's address or
        phone number."""
        return any(self._names_text(text) for text in _strings(value))

    def _names_text(self, text: str) -> bool:
        if self.address and self.address in text.lower():
            return True
        digits = self.phone_digits
        if digits is None:
            return False
        found = _digits(text)
        return len(found) >= _PHONE_MIN and (digits.endswith(found) or found.endswith(digits))


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


# -- finders: how the rows of one table are found for a person ---------------------------------


@dataclass(frozen=True, slots=True)
class ByContact:
    """Rows whose ``column`` is the contact's id."""

    column: str = "contact_id"

    def where(self, table: Table, person: Person) -> ColumnElement[bool]:
        return table.c[self.column] == person.contact_id

    def confirms(self, row: dict[str, Any], person: Person) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class ByParent:
    """Rows whose ``columns`` point at a row of ``parent`` that is the contact's (the steps of
    their runs, the results of their messages, a campaign's events about them)."""

    columns: tuple[str, ...]
    parent: Table
    keys: tuple[str, ...] = ("id",)
    parent_contact: str = "contact_id"

    def where(self, table: Table, person: Person) -> ColumnElement[bool]:
        theirs = select(*(self.parent.c[k] for k in self.keys)).where(
            self.parent.c[self.parent_contact] == person.contact_id
        )
        if len(self.columns) == 1:
            return table.c[self.columns[0]].in_(theirs)
        return tuple_(*(table.c[c] for c in self.columns)).in_(theirs)

    def confirms(self, row: dict[str, Any], person: Person) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class ByAddress:
    """Rows that name the person's e-mail address or phone number in one of ``columns`` (text
    or JSON): events stored before the contact existed, reports about an unknown message, log
    lines. ``workspace`` (a column, or a ``(column, parent table)`` pair) keeps the search to the
    contact's workspace; ``unlinked`` restricts it to rows attributed to no contact or to this
    one (a row of another contact that mentions the address is theirs)."""

    columns: tuple[str, ...]
    workspace: str | tuple[str, Table] | None = "workspace_id"
    unlinked: str | None = None

    def where(self, table: Table, person: Person) -> ColumnElement[bool]:
        patterns = person.like_patterns()
        if not patterns:
            return false()
        clauses: list[ColumnElement[bool]] = [
            or_(
                *(
                    cast(table.c[c], Text).ilike(p, escape="\\")
                    for c in self.columns
                    for p in patterns
                )
            )
        ]
        if isinstance(self.workspace, str):
            clauses.append(table.c[self.workspace] == person.workspace_id)
        elif self.workspace is not None:
            column, parent = self.workspace
            ids = select(parent.c.id).where(parent.c.workspace_id == person.workspace_id)
            clauses.append(table.c[column].in_(ids))
        if self.unlinked is not None:
            column_ = table.c[self.unlinked]
            clauses.append(or_(column_.is_(None), column_ == person.contact_id))
        return and_(*clauses)

    def confirms(self, row: dict[str, Any], person: Person) -> bool:
        return any(person.names(row[c]) for c in self.columns)


@dataclass(frozen=True, slots=True)
class Sealed:
    """Rows of the workspace whose ``column`` is an encrypted answer naming the person (stored
    idempotency answers): each is opened with the instance key and read."""

    column: str
    workspace: str = "workspace_id"

    def where(self, table: Table, person: Person) -> ColumnElement[bool]:
        if person.box is None:
            return false()
        return table.c[self.workspace] == person.workspace_id

    def confirms(self, row: dict[str, Any], person: Person) -> bool:
        return person.names(open_sealed(person, row[self.column]))


def open_sealed(person: Person, sealed: bytes | None) -> Any:
    """A sealed answer's content (JSON when it is JSON), ``None`` when it cannot be opened."""
    if person.box is None or not sealed:
        return None
    try:
        text = person.box.decrypt(bytes(sealed))
    except SecretBoxError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True, slots=True)
class AnyOf:
    """Rows found by any of ``finders`` (an inbound event: attributed to the contact, or naming
    their address before it was)."""

    finders: tuple[ByContact | ByAddress, ...]

    def where(self, table: Table, person: Person) -> ColumnElement[bool]:
        return or_(*(f.where(table, person) for f in self.finders))

    def confirms(self, row: dict[str, Any], person: Person) -> bool:
        return any(_found(f, row, person) for f in self.finders)


def _found(finder: ByContact | ByAddress, row: dict[str, Any], person: Person) -> bool:
    if isinstance(finder, ByContact):
        return bool(row[finder.column] == person.contact_id)
    return finder.confirms(row, person)


Finder = ByContact | ByParent | ByAddress | Sealed | AnyOf
