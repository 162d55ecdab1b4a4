"""Base types for request, response and job structs, and list pagination."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

import msgspec

from app.errors import ValidationFailed

T = TypeVar("T")

MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50
PageSize = Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE_SIZE)]
"""A ``limit`` query parameter: ``limit: FromQuery[PageSize] = DEFAULT_PAGE_SIZE``."""


class Schema(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every request and response struct: unknown fields are refused, never ignored."""


class Page(msgspec.Struct, Generic[T], kw_only=True):
    """One page of a list. Pass ``next_cursor`` back as ``cursor`` to get the next page."""

    items: list[T]
    next_cursor: str | None = None


def page_of(items: list[T], limit: int, cursor_of: object = None) -> Page[T]:
    """Build a page from ``limit + 1`` fetched rows: the extra row only says there is more."""
    more = len(items) > limit
    items = items[:limit]
    next_cursor = None
    if more and items:
        last = items[-1]
        next_cursor = str(cursor_of(last) if callable(cursor_of) else getattr(last, "id"))  # noqa: B009
    return Page(items=items, next_cursor=next_cursor)


def id_cursor(cursor: str | None) -> int | None:
    """The id after which the next page starts, from a cursor made by :func:`page_of`."""
    if cursor is None or cursor == "":
        return None
    if not cursor.isdigit() or len(cursor) > 19:
        raise ValidationFailed.field("cursor", "is not a cursor this list returned")
    return int(cursor)
