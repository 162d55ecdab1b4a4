"""The contact fields each message channel needs to reach someone, in one place.

| node | channel | needs |
|---|---|---|
| ``send_email`` | email | the contact's ``email`` |
| ``send_sms`` | sms | the contact's ``phone`` |
| ``send_push`` | push | a device token in a text custom field: the push provider's ``token_field`` (default ``push_token``) |
| ``send_letter`` | letter | text custom fields ``address_line1``, ``address_city``, ``address_postal_code``, ``address_country`` (ISO code); ``address_line2`` and ``address_state`` when present |

``email`` and ``phone`` are columns every contact has. The custom fields are checked twice:

- **at publish** (:func:`undefined_fields`): a funnel with a push or letter node cannot be
  published while the workspace has no text field definition for what that channel reads, since
  no contact could ever receive it;
- **per contact, when the node runs** (:func:`missing_for`): a contact whose value is empty
  cannot receive the message; the node fails visibly (its ``on_failure`` branch, or the run ends
  ``failed``) instead of queueing a message that cannot go out.

The channels read the same names at send time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PUSH_TOKEN_FIELD = "push_token"  # noqa: S105 - a field name, not a secret
"""The custom field holding a contact's device token unless the push provider names another."""
LETTER_ADDRESS = ("address_line1", "address_city", "address_postal_code", "address_country")
"""The custom fields of a postal address a letter cannot go without."""
LETTER_ADDRESS_OPTIONAL = ("address_line2", "address_state")
"""Used on the envelope when the contact has them."""

CHANNEL_OF = {
    "send_email": "email",
    "send_sms": "sms",
    "send_push": "push",
    "send_letter": "letter",
}


def custom_fields_needed(kind: str, *, push_token_field: str = PUSH_TOKEN_FIELD) -> tuple[str, ...]:
    """The custom fields a message node of ``kind`` reads from the contact."""
    if kind == "send_push":
        return (push_token_field,)
    if kind == "send_letter":
        return LETTER_ADDRESS
    return ()


def undefined_fields(
    kind: str, field_types: Mapping[str, str], *, push_token_field: str = PUSH_TOKEN_FIELD
) -> list[str]:
    """The fields ``kind`` needs that the workspace does not define as text fields."""
    return [
        name
        for name in custom_fields_needed(kind, push_token_field=push_token_field)
        if field_types.get(name) != "text"
    ]


def missing_for(
    kind: str,
    *,
    email: str | None,
    phone: str | None,
    fields: Mapping[str, Any] | None,
    push_token_field: str = PUSH_TOKEN_FIELD,
) -> list[str]:
    """What this contact lacks for a message of ``kind`` (empty: it can go out)."""
    if kind == "send_email":
        return [] if email else ["email"]
    if kind == "send_sms":
        return [] if phone else ["phone"]
    values = fields or {}
    return [
        name
        for name in custom_fields_needed(kind, push_token_field=push_token_field)
        if not (isinstance(values.get(name), str) and values[name].strip())
    ]
