"""The length of a text column binds every write, on both databases.

PostgreSQL refuses a value longer than its ``varchar(n)`` with an error the web layer can only
answer with a 500, and SQLite stores it whatever its length, so the same request behaved
differently on the two and an API field whose bound was looser than its column (a form's tag) was
a server error in server mode only. Every object the unit of work inserts or updates is measured
here, before its statement, against the column it is written to: an over-long value is refused as
the caller's input (422, naming the field), whichever code path set it.

Request structs still declare their bounds (:mod:`app.schemas`), so the API's document tells the
truth; this is the floor beneath them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import String, event
from sqlalchemy.orm import Mapper

from app.errors import ValidationFailed


@cache
def _bounded_columns(mapper: Mapper[Any]) -> tuple[tuple[str, int], ...]:
    """(attribute, maximum characters) of the mapper's bounded text columns."""
    bounded: list[tuple[str, int]] = []
    for attribute in mapper.column_attrs:
        for column in attribute.columns:
            if isinstance(column.type, String) and column.type.length:
                bounded.append((attribute.key, column.type.length))
    return tuple(bounded)


def check_column_bounds(mapper: Mapper[Any], target: Any) -> None:
    """Refuse the write when one of ``target``'s text values is longer than its column."""
    state = vars(target)
    for key, length in _bounded_columns(mapper):
        value = state.get(key)
        if isinstance(value, str) and len(value) > length:
            raise ValidationFailed.field(
                key, f"must be at most {length} characters (got {len(value)})", code="too_long"
            )


def _on_write(mapper: Mapper[Any], _connection: Any, target: Any) -> None:
    check_column_bounds(mapper, target)


def bind_column_lengths(base: type[Any]) -> None:
    """Measure every insert and update of ``base``'s mapped classes (called once, by the base)."""
    event.listen(base, "before_insert", _on_write, propagate=True)
    event.listen(base, "before_update", _on_write, propagate=True)
