"""SendGrid's side of the signed Event Webhook: events in SendGrid's documented shape, signed as
SendGrid signs them, so the receiver is tested against the real scheme and not against itself.

SendGrid POSTs a JSON *array* of events (``Content-Type: application/json``, user agent
``SendGrid Event API``) with ``X-Twilio-Email-Event-Webhook-Timestamp`` (unix seconds) and
``X-Twilio-Email-Event-Webhook-Signature``: the base64 of the DER ECDSA signature, P-256 with
SHA-256, over the timestamp followed by the raw body. The account's settings page shows the
*verification key*: the base64 of the DER public key (:attr:`SendGridEventWebhook.verification_key`).

Each event carries ``email``, ``timestamp``, ``smtp-id`` (the ``Message-ID`` the message was sent
with), ``event``, ``category``, ``sg_event_id`` (unique per event) and ``sg_message_id``, plus what
its type adds: ``reason``/``status``/``type`` (``bounce`` or ``blocked``) and
``bounce_classification`` for a bounce, ``reason`` for a drop, ``response``/``attempt`` for a
deferral, ``useragent``/``ip``/``url`` for opens, clicks and group unsubscribes.
"""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.clock import Clock, SystemClock
from app.integrations.mail.sendgrid import SIGNATURE_HEADER, TIMESTAMP_HEADER

_sequence = itertools.count(1)

_EXTRA: dict[str, dict[str, Any]] = {
    "processed": {},
    "dropped": {"reason": "Bounced Address", "status": "5.0.0"},
    "delivered": {"response": "250 OK", "ip": "168.1.1.1", "tls": 1},
    "deferred": {"response": "400 try again later", "attempt": "5"},
    "bounce": {
        "reason": "500 unknown recipient",
        "status": "5.0.0",
        "type": "bounce",
        "bounce_classification": "Invalid Address",
    },
    "open": {"useragent": "Mozilla/4.0 (compatible; MSIE 6.1)", "ip": "255.255.255.255"},
    "click": {
        "useragent": "Mozilla/4.0 (compatible; MSIE 6.1)",
        "ip": "255.255.255.255",
        "url": "http://www.sendgrid.com/",
        "url_offset": {"index": 0, "type": "html"},
    },
    "spamreport": {},
    "unsubscribe": {},
    "group_unsubscribe": {
        "useragent": "Mozilla/4.0",
        "ip": "255.255.255.255",
        "url": "http://www.sendgrid.com/",
        "asm_group_id": 10,
    },
}
"""The fields each event type adds to the common ones (SendGrid's documented samples)."""


def _private_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@dataclass
class SendGridEventWebhook:
    """One account's Event Webhook: its key pair, its URL and the clock it signs with."""

    url: str = ""
    clock: Clock = field(default_factory=SystemClock)
    key: ec.EllipticCurvePrivateKey = field(default_factory=_private_key)
    other_key: ec.EllipticCurvePrivateKey = field(default_factory=_private_key)
    """A key SendGrid never showed anyone: signs forged requests."""

    @property
    def verification_key(self) -> str:
        """The public key as SendGrid's settings page shows it (base64 of the DER)."""
        der = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return base64.b64encode(der).decode()

    def event(self, kind: str, email: str, message_id: str, **fields: Any) -> dict[str, Any]:
        """A ``kind`` event about the message sent to ``email`` as ``message_id``."""
        n = next(_sequence)
        return {
            "email": email,
            "timestamp": int(self.clock.now().timestamp()),
            "smtp-id": message_id,
            "event": kind,
            "category": ["cat facts"],
            "sg_event_id": base64.urlsafe_b64encode(f"sg-event-{n:08d}".encode()).decode(),
            "sg_message_id": f"14c5d75ce93.dfd.64b469.filter0001.{n}.5515E0B88.0",
            **_EXTRA.get(kind, {}),
            **fields,
        }

    def signed(
        self, events: list[dict[str, Any]], *, at: int | None = None, forged: bool = False
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers SendGrid would POST for ``events`` (signed at ``at``, else
        now)."""
        body = json.dumps(events).encode()
        timestamp = str(int(self.clock.now().timestamp()) if at is None else at)
        key = self.other_key if forged else self.key
        signature = key.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "SendGrid Event API",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: base64.b64encode(signature).decode(),
        }
        return body, headers

    async def deliver(
        self, client: httpx.AsyncClient, events: list[dict[str, Any]], *, at: int | None = None
    ) -> httpx.Response:
        """POST ``events`` to the webhook's URL, signed (``client`` may be any transport)."""
        body, headers = self.signed(events, at=at)
        return await client.post(self.url, content=body, headers=headers)
