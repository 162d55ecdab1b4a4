"""Delivery reports in the providers' own webhook formats, turned into one shape.

- Amazon SES (through SNS, see :mod:`app.integrations.mail.sns`): notifications
  (``notificationType``) and event publishing (``eventType``): ``Bounce`` (only ``Permanent``
  bounces count: a transient one is a deferral the provider retries), ``Complaint``,
  ``Delivery``, ``Open``, ``Click``.
- Mailgun webhooks: ``{"signature": {timestamp, token, signature}, "event-data": {…}}``, the
  signature a hex HMAC-SHA256 of ``timestamp + token`` with the account's webhook signing key;
  ``failed`` with ``severity: permanent`` is a hard bounce, ``temporary`` is left alone. The
  signature does not cover the event, so a timestamp more than 15 minutes away is refused here
  and the receiver refuses a token it has seen before (it remembers them in the database).
- SendGrid and Postmark: :mod:`app.integrations.mail.sendgrid`, :mod:`app.integrations.mail.postmark`.

A report names the message by every id the provider gives: SES replaces the ``Message-ID``
header with its own unless told otherwise, so our ``X-Sweepline-Message-Id`` (the same value) is
looked for too; the receiver takes the first id it recognises.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

import msgspec

OUR_HEADER = "X-Sweepline-Message-Id"


class Report(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    """delivered, opened, clicked, bounced, complained or unsubscribed."""
    message_ids: list[str]
    email: str | None
    external_id: str
    url: str | None = None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _ses_message_ids(mail: Mapping[str, Any]) -> list[str]:
    """Our own header first (it survives a provider that rewrote ``Message-ID``), then the
    ``Message-ID`` SES reports."""
    ours: list[str] = []
    others: list[str] = []
    for header in _dicts(mail.get("headers")):
        name = str(header.get("name", "")).lower()
        value = _text(header.get("value"))
        if value and name == OUR_HEADER.lower():
            ours.append(value)
        elif value and name == "message-id":
            others.append(value)
    common = mail.get("commonHeaders")
    if isinstance(common, dict) and _text(common.get("messageId")):
        others.append(common["messageId"])
    return [*ours, *others]


def from_ses(event: Mapping[str, Any], notification_id: str) -> list[Report]:
    """Reports carried by one SES notification (one per affected recipient)."""
    kind_of = str(event.get("eventType") or event.get("notificationType") or "")
    mail = event.get("mail") if isinstance(event.get("mail"), dict) else {}
    assert isinstance(mail, dict)
    ids = _ses_message_ids(mail)
    recipients: list[str | None]
    url = None
    if kind_of == "Bounce":
        bounce = event.get("bounce") or {}
        if not isinstance(bounce, dict) or bounce.get("bounceType") != "Permanent":
            return []
        kind = "bounced"
        recipients = [_text(r.get("emailAddress")) for r in _dicts(bounce.get("bouncedRecipients"))]
    elif kind_of == "Complaint":
        complaint = event.get("complaint") or {}
        kind = "complained"
        recipients = [
            _text(r.get("emailAddress"))
            for r in _dicts(
                complaint.get("complainedRecipients") if isinstance(complaint, dict) else []
            )
        ]
    elif kind_of in {"Delivery", "Open", "Click"}:
        kind = {"Delivery": "delivered", "Open": "opened", "Click": "clicked"}[kind_of]
        recipients = [_text(r) for r in mail.get("destination") or []] or [None]
        click = event.get("click")
        if isinstance(click, dict):
            url = _text(click.get("link"))
    else:
        return []
    return [
        Report(
            kind=kind,
            message_ids=ids,
            email=email,
            external_id=f"ses:{notification_id}:{email or ''}"[:200],
            url=url,
        )
        for email in (recipients or [None])
    ]


def mailgun_signature(signing_key: str, timestamp: str, token: str) -> str:
    return hmac.new(signing_key.encode(), (timestamp + token).encode(), hashlib.sha256).hexdigest()


MAILGUN_TOLERANCE_SECONDS = 15 * 60
"""A Mailgun request signed longer ago (or further ahead) than this is refused: its token is
remembered for as long, so a captured request cannot be replayed."""


class MailgunRefused(Exception):
    """Not a request Mailgun signed just now with the workspace's key (answered 401)."""


class MailgunToken(msgspec.Struct, frozen=True):
    token: str
    timestamp: int


def verify_mailgun(signing_key: str, body: Mapping[str, Any], now_unix: int) -> MailgunToken:
    """The verified signature's token and timestamp; :class:`MailgunRefused` when the signature
    does not match or its timestamp is more than 15 minutes from now. The signature covers only
    ``timestamp + token``, not the event: the caller must refuse a token it has seen before."""
    signature = body.get("signature")
    if not isinstance(signature, dict):
        raise MailgunRefused("the Mailgun signature is missing")
    timestamp, token, given = (signature.get(k) for k in ("timestamp", "token", "signature"))
    if not all(isinstance(v, str) and v for v in (timestamp, token, given)):
        raise MailgunRefused("the Mailgun signature needs timestamp, token and signature")
    expected = mailgun_signature(signing_key, str(timestamp), str(token))
    if not hmac.compare_digest(expected, str(given)):
        raise MailgunRefused("the Mailgun signature does not match")
    if not str(timestamp).isdigit():
        raise MailgunRefused("the Mailgun timestamp is not a number of seconds")
    signed_at = int(str(timestamp))
    if abs(now_unix - signed_at) > MAILGUN_TOLERANCE_SECONDS:
        raise MailgunRefused("the Mailgun signature was not made in the last 15 minutes")
    return MailgunToken(str(token), signed_at)


_MAILGUN_KINDS = {
    "delivered": "delivered",
    "opened": "opened",
    "clicked": "clicked",
    "unsubscribed": "unsubscribed",
    "complained": "complained",
}


def from_mailgun(body: Mapping[str, Any]) -> list[Report]:
    data = body.get("event-data")
    if not isinstance(data, dict):
        return []
    event = str(data.get("event", ""))
    if event == "failed":
        if data.get("severity") != "permanent":
            return []
        kind = "bounced"
    elif event in _MAILGUN_KINDS:
        kind = _MAILGUN_KINDS[event]
    else:
        return []
    message = data.get("message") if isinstance(data.get("message"), dict) else {}
    headers = message.get("headers") if isinstance(message, dict) else None
    raw_id = _text(headers.get("message-id")) if isinstance(headers, dict) else None
    ids = [f"<{raw_id.strip('<>')}>"] if raw_id else []
    event_id = _text(data.get("id")) or f"{event}:{raw_id}:{data.get('timestamp')}"
    return [
        Report(
            kind=kind,
            message_ids=ids,
            email=_text(data.get("recipient")),
            external_id=f"mailgun:{event_id}"[:200],
            url=_text(data.get("url")),
        )
    ]
