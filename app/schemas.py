"""Base types for request, response and job structs (pagination: :mod:`app.pagination`)."""

from __future__ import annotations

from functools import cache
from typing import Annotated, get_type_hints

import msgspec

from app.platform.validation import email_problem

# Length bounds of request fields: every string, list and map a client sends has one, so no field
# can take the whole body (which request_bounds caps) and none reaches a column it overflows.
Key = Annotated[str, msgspec.Meta(max_length=100)]
"""An identifier a client chooses or quotes: a field key, a code, a node id, a role."""
Name = Annotated[str, msgspec.Meta(max_length=200)]
"""A name people give a thing (a list, a funnel, a form, a campaign, a person's first name)."""
Text = Annotated[str, msgspec.Meta(max_length=10_000)]
"""A short text: a value, a success message, a domain, a path."""
Subject = Annotated[str, msgspec.Meta(max_length=500)]
"""An e-mail's subject line (its column's length)."""
Document = Annotated[str, msgspec.Meta(max_length=1_000_000)]
"""A body of content: an e-mail's HTML or text (the body limit applies too)."""
Upload = Annotated[str, msgspec.Meta(max_length=100_000_000)]
"""A file sent inline (a CSV): what binds is the request body limit, ``MAX_BODY_BYTES``, which an
operator may raise for large imports."""
Url = Annotated[str, msgspec.Meta(max_length=2048)]
EmailAddress = Annotated[str, msgspec.Meta(max_length=254, extra_json_schema={"format": "email"})]
"""An e-mail address (RFC 5321's 254 characters at most); its syntax is checked with
:func:`app.platform.validation.email_problem` wherever it is stored."""
NOT_BLANK = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
"""Text with something in it besides spaces (and no NUL character), stated in the document where
a field is refused when it is empty or blank once stripped."""
_GIVEN = msgspec.Meta(extra_json_schema={"pattern": NOT_BLANK})
GivenName = Annotated[Name, _GIVEN]
"""A :data:`Name` that must be given (the API refuses an empty or blank one)."""
GivenText = Annotated[Text, _GIVEN]
GivenSubject = Annotated[Subject, _GIVEN]
GivenDocument = Annotated[Document, _GIVEN]


RowRef = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]
"""A row id sent in a body: a number no 64-bit id column can hold is refused before the query."""
Count = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
"""A count, a number of days, a rate, a provider's location code."""
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""A whole number a client stores as a value (a custom field, a compared value)."""
MAX_ITEMS = 1_000
"""Entries of a list or map field, unless the field says otherwise."""


class Schema(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every request and response struct: unknown fields are refused, never ignored, and a field
    declared :data:`EmailAddress` must hold one (an invalid one is a 400 naming the field)."""

    def __post_init__(self) -> None:
        for name in _email_fields(type(self)):
            value = getattr(self, name)
            if isinstance(value, str) and value and (problem := email_problem(value)):
                raise ValueError(f"`{name}` {problem}")


@cache
def _email_fields(cls: type) -> tuple[str, ...]:
    hints = get_type_hints(cls, include_extras=True)
    return tuple(
        name for name, hint in hints.items() if hint == EmailAddress or hint == EmailAddress | None
    )
