"""Mailgun's side of its webhooks: events in Mailgun's documented shape, signed as Mailgun signs
them.

Mailgun POSTs ``{"signature": {"timestamp", "token", "signature"}, "event-data": {…}}`` as JSON;
``signature`` is the hex HMAC-SHA256 of ``timestamp + token`` keyed with the account's HTTP
webhook signing key, ``token`` a random 50-character string, new for every request. The signature
does not cover ``event-data``. ``event-data`` carries ``id``, ``timestamp`` (float seconds),
``event`` (``delivered``, ``failed`` with ``severity`` ``permanent`` or ``temporary``,
``opened``, ``clicked``, ``unsubscribed``, ``complained``), ``recipient``, and ``message.headers``
with the ``message-id`` the message was sent with, without angle brackets.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.clock import Clock, SystemClock
from app.integrations.mail.reports import mailgun_signature


@dataclass
class MailgunWebhook:
    """One domain's webhooks: the account's signing key, the URL and the clock."""

    url: str = ""
    signing_key: str = field(default_factory=lambda: f"key-{secrets.token_hex(16)}")
    clock: Clock = field(default_factory=SystemClock)

    def event(self, kind: str, email: str, message_id: str, **fields: Any) -> dict[str, Any]:
        """The ``event-data`` of a ``kind`` event about the message sent as ``message_id``."""
        data: dict[str, Any] = {
            "id": secrets.token_urlsafe(16),
            "timestamp": self.clock.now().timestamp(),
            "log-level": "info",
            "event": kind,
            "recipient": email,
            "recipient-domain": email.rpartition("@")[2],
            "message": {
                "headers": {
                    "to": email,
                    "message-id": message_id.strip().strip("<>"),
                    "from": "sender@example.com",
                    "subject": "Test",
                },
                "attachments": [],
                "size": 111,
            },
            "tags": [],
            "user-variables": {},
        }
        if kind == "failed":
            data.update(
                {"log-level": "error", "severity": "permanent", "reason": "bounce"},
                **{"delivery-status": {"code": 550, "message": "5.1.1 No such user"}},
            )
        return {**data, **fields}

    def signed(
        self,
        event_data: dict[str, Any],
        *,
        at: int | None = None,
        token: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """The body Mailgun would POST: signed at ``at`` (else now) with a fresh token (or
        ``token``) and the signing key (or ``key``)."""
        timestamp = str(int(self.clock.now().timestamp()) if at is None else at)
        token = token or secrets.token_hex(25)
        signature = mailgun_signature(key or self.signing_key, timestamp, token)
        return {
            "signature": {"timestamp": timestamp, "token": token, "signature": signature},
            "event-data": event_data,
        }

    async def deliver(self, client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
        return await client.post(
            self.url,
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
