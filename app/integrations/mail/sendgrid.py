"""SendGrid's signed Event Webhook: the signature check and the events as reports (pure).

SendGrid POSTs a JSON array of events with two headers: ``X-Twilio-Email-Event-Webhook-Timestamp``
and ``X-Twilio-Email-Event-Webhook-Signature``, the base64 of a DER-encoded ECDSA (P-256)
signature over SHA-256 of ``timestamp + raw body``. It verifies with the webhook's *verification
key*, which SendGrid's settings page shows as the base64 of the DER public key (PEM without the
armour lines); the armoured form is accepted too.

Events (one report each, idempotent on ``sg_event_id``, attributed by ``smtp-id``, the
``Message-ID`` the message was sent with):

- ``bounce`` of ``type`` ``bounce`` is a permanent bounce; ``type: blocked`` is a temporary
  refusal by the receiving server and is not acted on (as ``deferred``);
- ``dropped`` (SendGrid did not send it) acts only for the reasons that say the address is
  suppressed at SendGrid: ``Bounced Address``, ``Spam Reporting Address``,
  ``Unsubscribed Address``;
- ``spamreport`` → complained; ``unsubscribe`` and ``group_unsubscribe`` → unsubscribed;
- ``delivered``, ``open``, ``click`` (with its ``url``);
- ``processed``, ``deferred``, ``group_resubscribe`` and anything else: not acted on.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.integrations.mail.reports import Report

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
TOLERANCE_SECONDS = 15 * 60


class SendGridRefused(Exception):
    """The request is not a verifiable SendGrid event post (answered 401, nothing stored)."""


def load_verification_key(value: str) -> ec.EllipticCurvePublicKey:
    """The verification key as SendGrid shows it (base64 DER), or as PEM."""
    text = value.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
        else:
            key = serialization.load_der_public_key(base64.b64decode("".join(text.split())))
    except (ValueError, binascii.Error, TypeError) as exc:
        raise SendGridRefused(f"the configured verification key is unusable: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise SendGridRefused("the configured verification key is not an ECDSA public key")
    return key


def verify(
    verification_key: str, timestamp: str, signature: str, body: bytes, now_unix: int
) -> None:
    """Raise :class:`SendGridRefused` unless ``signature`` signs ``timestamp + body`` and the
    timestamp is within 15 minutes of now (a captured request replayed later is refused)."""
    if not timestamp or not signature:
        raise SendGridRefused(f"the {SIGNATURE_HEADER} and {TIMESTAMP_HEADER} headers are needed")
    key = load_verification_key(verification_key)
    try:
        der = base64.b64decode(signature, validate=True)
        key.verify(der, timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, binascii.Error):
        raise SendGridRefused("the SendGrid signature does not verify") from None
    if not timestamp.isdigit() or abs(now_unix - int(timestamp)) > TOLERANCE_SECONDS:
        raise SendGridRefused("the SendGrid signature was not made in the last 15 minutes")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


_DROPPED = {
    "Bounced Address": "bounced",
    "Spam Reporting Address": "complained",
    "Unsubscribed Address": "unsubscribed",
}
_KINDS = {
    "spamreport": "complained",
    "unsubscribe": "unsubscribed",
    "group_unsubscribe": "unsubscribed",
    "delivered": "delivered",
    "open": "opened",
    "click": "clicked",
}


def _kind(event: Mapping[str, Any]) -> str | None:
    name = event.get("event")
    if name == "bounce":
        # Older payloads have no ``type``; a ``bounce`` event was then always a hard bounce.
        return "bounced" if event.get("type", "bounce") == "bounce" else None
    if name == "dropped":
        return _DROPPED.get(str(event.get("reason", "")))
    return _KINDS.get(str(name))


def _message_ids(event: Mapping[str, Any]) -> list[str]:
    smtp_id = _text(event.get("smtp-id"))
    return [f"<{smtp_id.strip().strip('<>')}>"] if smtp_id else []


def from_sendgrid(events: Any) -> list[Report]:
    """One report per event SendGrid posted that we act on."""
    if not isinstance(events, list):
        return []
    reports: list[Report] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = _kind(event)
        event_id = _text(event.get("sg_event_id"))
        if kind is None or event_id is None:
            continue
        reports.append(
            Report(
                kind=kind,
                message_ids=_message_ids(event),
                email=_text(event.get("email")),
                external_id=f"sendgrid:{event_id}"[:200],
                url=_text(event.get("url")) if kind == "clicked" else None,
            )
        )
    return reports
