"""Pagination of every list, in the API and on the dashboard: one page size rule, one cursor.

A list answers ``limit`` items and a ``next_cursor``; the caller passes the cursor back to get the
page after. A cursor is the decimal number the list put there (a row id, or the offset of a
report's next row); anything else is the same 422 wherever it is sent, and so is a page size
outside the list's bounds. Engines decode the cursors of the lists they page themselves with
:func:`cursor_number`; the web layer's ``paging`` dependency (:mod:`app.web.deps`) checks both
parameters before a handler runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

from app.errors import ValidationFailed

T = TypeVar("T")

MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50

CURSOR_PROBLEM = "is not a cursor this list returned"

# A 64-bit id has at most 19 digits: a longer number would overflow the column it is compared with.
_MAX_CURSOR_DIGITS = 19
# No list keys its pages on anything wider than a 64-bit column (or an offset PostgreSQL binds as
# one); narrower keys are settled by app.db.keyset.
_MAX_CURSOR = 2**63 - 1


def cursor_number(cursor: str | None, *, field: str = "cursor") -> int | None:
    """The number in a cursor this list returned (``None`` for the first page)."""
    if cursor is None or cursor == "":
        return None
    # isdigit() alone admits "³" and other digits int() refuses (a 500 under fuzzing).
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > _MAX_CURSOR_DIGITS:
        raise ValidationFailed.field(field, CURSOR_PROBLEM)
    number = int(cursor)
    if number > _MAX_CURSOR:
        raise ValidationFailed.field(field, CURSOR_PROBLEM)
    return number


def limit_problem(maximum: int) -> str:
    return f"must be a number from 1 to {maximum}"


def checked_limit(limit: int, maximum: int = MAX_PAGE_SIZE, *, field: str = "limit") -> int:
    """``limit`` when it is a page size this list serves, else the one 422 of every list."""
    if not 1 <= limit <= maximum:
        raise ValidationFailed.field(field, limit_problem(maximum))
    return limit


@dataclass(frozen=True, slots=True)
class Paging:
    """A list request's checked ``cursor`` and ``limit``; fetch ``limit + 1`` rows and build the
    answer with :func:`page_of`."""

    cursor: str | None
    limit: int
    after: int | None
    """The number in the cursor (the id the page continues after, or before, or an offset)."""

    @classmethod
    def of(cls, cursor: str | None, limit: int, maximum: int = MAX_PAGE_SIZE) -> Paging:
        return cls(
            cursor=cursor or None,
            limit=checked_limit(limit, maximum),
            after=cursor_number(cursor),
        )

    @property
    def fetch(self) -> int:
        """How many rows to read: one more than the page says whether there is a next page."""
        return self.limit + 1


class Page(msgspec.Struct, Generic[T], kw_only=True):
    """One page of a list. Pass ``next_cursor`` back as ``cursor`` to get the next page."""

    items: list[T]
    next_cursor: str | None = None


def page_of(items: list[T], limit: int, cursor_of: Callable[[T], object] | None = None) -> Page[T]:
    """Build a page from ``limit + 1`` fetched rows: the extra row only says there is more. The
    cursor is ``cursor_of(last item)``, by default the item's ``id``."""
    more = len(items) > limit
    items = items[:limit]
    next_cursor = None
    if more and items:
        last = items[-1]
        next_cursor = str(cursor_of(last) if cursor_of is not None else getattr(last, "id"))  # noqa: B009
    return Page(items=items, next_cursor=next_cursor)
