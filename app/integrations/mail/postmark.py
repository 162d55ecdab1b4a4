"""Postmark's webhooks: the credentials check and the records as reports (pure).

Postmark does not sign its webhooks. A webhook is set up with credentials of our choosing, which
Postmark sends on every request: HTTP basic auth (``https://user:password@…`` in the webhook URL,
or the webhook's ``HttpAuth``), and/or custom headers (the webhook's ``HttpHeaders``). The
workspace keeps them as secrets and each one configured must match (compared in constant time).

Records (``RecordType``), one report each:

- ``Bounce``: only ``Type`` ``HardBounce`` and ``BadEmailAddress`` are permanent (Postmark
  deactivates the address); ``SoftBounce``, ``Transient``, ``DnsError``, auto-responders and the
  rest are not acted on. Idempotent on the bounce's ``ID``.
- ``SpamComplaint`` → complained (idempotent on its ``ID``).
- ``SubscriptionChange`` with ``SuppressSending: true`` → by ``SuppressionReason``:
  ``HardBounce`` bounced, ``SpamComplaint`` complained, ``ManualSuppression`` unsubscribed.
  ``SuppressSending: false`` (the address reactivated at Postmark) lifts nothing here: a
  suppression is lifted by a person, not by a provider's report.
- ``Delivery``, ``Open``, ``Click`` (its ``OriginalLink``).

Attribution: Postmark's ``MessageID`` is Postmark's own id, not the ``Message-ID`` we sent, and
no documented record carries the message's headers. What records do carry is the message's
``Metadata``, which Postmark builds from ``X-PM-Metadata-<key>`` headers of mail sent through its
SMTP service (or the API's ``Metadata``): every message we send carries our id in
``X-PM-Metadata-sweepline_msgid`` (see :mod:`app.integrations.mail.message`), and a record without
it is attributed by its recipient address only (to the contact, not to a message). Records with
no ``ID`` are keyed by what makes them unique: the message, the recipient and the time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from typing import Any

from app.integrations.mail.reports import Report

METADATA_KEY = "sweepline_msgid"
"""Our message id in Postmark's ``Metadata`` (keys are at most 20 characters)."""


class PostmarkRefused(Exception):
    """The request does not carry the webhook's credentials (answered 401, nothing stored)."""


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _basic(authorization: str) -> str:
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def check_credentials(
    headers: Mapping[str, str], *, basic_auth: str | None, header: str | None
) -> None:
    """Every configured credential must match: ``basic_auth`` as ``user:password``, ``header``
    as ``Name: value``. Raise :class:`PostmarkRefused` otherwise (or when none is set)."""
    if not basic_auth and not header:
        raise PostmarkRefused("no credentials are configured for the Postmark webhook")
    ok = True
    if basic_auth:
        ok &= _same(_basic(headers.get("authorization", "")), basic_auth)
    if header:
        name, _, value = (part.strip() for part in header.partition(":"))
        if not name or not value:
            # An empty value would match a request without the header.
            raise PostmarkRefused("the Postmark header secret must be 'Name: value'")
        ok &= _same(headers.get(name.lower(), ""), value)
    if not ok:
        raise PostmarkRefused("the Postmark webhook credentials do not match")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


_PERMANENT = {"HardBounce", "BadEmailAddress"}
_SUPPRESSION = {
    "HardBounce": "bounced",
    "SpamComplaint": "complained",
    "ManualSuppression": "unsubscribed",
}


def _kind(record: Mapping[str, Any]) -> str | None:
    record_type = record.get("RecordType")
    if record_type == "Bounce":
        return "bounced" if record.get("Type") in _PERMANENT else None
    if record_type == "SpamComplaint":
        return "complained"
    if record_type == "SubscriptionChange":
        if record.get("SuppressSending") is not True:
            return None
        return _SUPPRESSION.get(str(record.get("SuppressionReason", "")))
    return {"Delivery": "delivered", "Open": "opened", "Click": "clicked"}.get(str(record_type))


def _key(record: Mapping[str, Any], recipient: str | None) -> str:
    record_type = str(record.get("RecordType"))
    if record.get("ID") is not None and record_type in {"Bounce", "SpamComplaint"}:
        return f"{record_type}:{record['ID']}"
    at = next(
        (
            str(record[k])
            for k in ("DeliveredAt", "ReceivedAt", "ChangedAt", "BouncedAt")
            if record.get(k)
        ),
        "",
    )
    return f"{record_type}:{record.get('MessageID')}:{recipient}:{at}"


def from_postmark(record: Any) -> list[Report]:
    """The report one Postmark webhook record gives (none for what is not acted on)."""
    if not isinstance(record, dict):
        return []
    kind = _kind(record)
    if kind is None:
        return []
    recipient = _text(record.get("Recipient")) or _text(record.get("Email"))
    metadata = record.get("Metadata")
    ours = _text(metadata.get(METADATA_KEY)) if isinstance(metadata, dict) else None
    return [
        Report(
            kind=kind,
            message_ids=[f"<{ours.strip('<>')}>"] if ours else [],
            email=recipient,
            external_id=f"postmark:{_key(record, recipient)}"[:200],
            url=_text(record.get("OriginalLink")) if kind == "clicked" else None,
        )
    ]
