"""Keyset conditions of the lists that page by a number: ``column > after``, ``column < before``,
true to what the column can hold.

A cursor is a decimal number of up to 19 digits (:mod:`app.pagination`). A number past the
column's range names no row, and PostgreSQL refuses to bind it to the column's type ("value out
of int32 range": a 500), where SQLite's 64-bit integers hid it. So the comparison is settled here,
without the database: nothing follows such a number, and the whole list comes before it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.elements import ColumnElement

Key = ColumnElement[int] | QueryableAttribute[int]

_HIGHEST: tuple[tuple[type[sa.Integer], int], ...] = (
    (sa.SmallInteger, 2**15 - 1),
    (sa.BigInteger, 2**63 - 1),
    (sa.Integer, 2**31 - 1),
)
"""Most specific first: ``BigInteger`` and ``SmallInteger`` are kinds of ``Integer``."""


def highest_value(type_: sa.types.TypeEngine[Any]) -> int:
    """The largest number an integer column of ``type_`` holds (the server database's type, not
    SQLite's variant: lists answer alike on both)."""
    for kind, high in _HIGHEST:
        if isinstance(type_, kind):
            return high
    raise TypeError(f"{type_!r} is not an integer type")


def after(column: Key, value: int) -> ColumnElement[bool]:
    """``column > value``; false when ``value`` is at or past the column's range."""
    if value >= highest_value(column.expression.type):
        return sa.false()
    return column > value


def before(column: Key, value: int) -> ColumnElement[bool]:
    """``column < value``; true when ``value`` is past the column's range."""
    if value > highest_value(column.expression.type):
        return sa.true()
    return column < value
