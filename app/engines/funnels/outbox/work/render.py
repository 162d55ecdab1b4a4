"""Merge variables: ``{{first_name}}`` in a creative becomes the contact's value at send time;
a dotted name (``{{http.check.data.plan}}``, ``{{vars.intro}}``) reads a value the run produced
(see :mod:`app.engines.funnels.runs.work.context`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.engines.funnels.definitions.validate import MERGE_VARIABLE
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.work.unsubscribe import PLACEHOLDERS
from app.engines.funnels.runs.work.context import as_text, lookup

CONTEXT_KEY = "@run"
"""Where :func:`variables` keeps the run's context (not a valid field key: no collision)."""


def variables(contact: Contact, context: Mapping[str, Any]) -> dict[str, Any]:
    """What a creative may refer to: contact attributes, custom fields and run variables."""
    values: dict[str, Any] = dict(contact.fields or {})
    values.update(
        {
            "email": contact.email or "",
            "phone": contact.phone or "",
            "first_name": contact.first_name,
            "last_name": contact.last_name,
            "timezone": contact.timezone,
        }
    )
    values.update(context.get("vars", {}))
    values[CONTEXT_KEY] = context
    return values


def render(template: str, values: Mapping[str, Any]) -> str:
    """Replace every ``{{name}}``; the validator guarantees the names are known, a value that is
    missing for this contact renders empty. The unsubscribe links stay placeholders: they are
    signed and filled in when the message is sent."""

    def one(match: Any) -> str:
        name = match.group(1)
        if name in PLACEHOLDERS:
            return str(match.group(0))
        if "." in name:
            return as_text(lookup(values.get(CONTEXT_KEY) or {}, name))
        value = values.get(name)
        return "" if value is None else str(value)

    return MERGE_VARIABLE.sub(one, template)
