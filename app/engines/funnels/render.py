"""Merge variables: ``{{first_name}}`` in a creative becomes the contact's value at send time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.engines.funnels.models import Contact
from app.engines.funnels.validate import MERGE_VARIABLE


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
    return values


def render(template: str, values: Mapping[str, Any]) -> str:
    """Replace every ``{{name}}``; the validator guarantees the names are known, a value that is
    missing for this contact renders empty."""

    def one(match: Any) -> str:
        value = values.get(match.group(1))
        return "" if value is None else str(value)

    return MERGE_VARIABLE.sub(one, template)
