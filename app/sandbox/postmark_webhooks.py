"""Postmark's side of its webhooks: records in Postmark's documented shapes, posted with the
credentials set on the webhook, so the receiver is tested against what Postmark really sends.

Postmark does not sign webhooks. A webhook carries the credentials it was set up with: HTTP basic
auth (``HttpAuth`` ``Username``/``Password``, or ``user:password@`` in its URL) and custom headers
(``HttpHeaders``). One record is POSTed a request as JSON (``Content-Type: application/json``).

Records (``RecordType``): ``Bounce`` (``ID``, ``Type``/``TypeCode``/``Name`` — ``HardBounce`` 1,
``Transient`` 2, ``SoftBounce`` 4096, ``BadEmailAddress`` 100000 … — ``Email``, ``BouncedAt``,
``Inactive``), ``SpamComplaint`` (the same fields, ``Type`` ``SpamComplaint``, ``TypeCode`` 512),
``SubscriptionChange`` (``Recipient``, ``ChangedAt``, ``Origin``, ``SuppressSending``,
``SuppressionReason``), ``Delivery`` (``Recipient``, ``DeliveredAt``), ``Open`` and ``Click``
(``Recipient``, ``ReceivedAt``, ``OriginalLink``). Every record has Postmark's own ``MessageID``,
``ServerID``, ``MessageStream``, ``Tag`` and the message's ``Metadata``; mail sent through
Postmark's SMTP service gets its metadata from ``X-PM-Metadata-<key>`` headers, which
:meth:`PostmarkWebhook.metadata_of` reads the way Postmark does.
"""

from __future__ import annotations

import base64
import itertools
import json
import uuid
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from typing import Any

import httpx

from app.clock import Clock, SystemClock

_ids = itertools.count(4323372036854775807 - 10_000)

_BOUNCE_CODES = {
    "HardBounce": (1, "Hard bounce"),
    "Transient": (2, "Message delayed"),
    "SoftBounce": (4096, "Soft bounce"),
    "BadEmailAddress": (100000, "Invalid email address"),
    "SpamComplaint": (512, "Spam complaint"),
}


@dataclass
class PostmarkWebhook:
    """One server's webhook: its URL, the credentials set on it and the clock it stamps with."""

    url: str = ""
    username: str = "postmark"
    password: str = "pm-sandbox-password"  # noqa: S105 - the simulator's own credential
    header: tuple[str, str] | None = None
    """A custom header (name, value) set on the webhook, if any."""
    clock: Clock = field(default_factory=SystemClock)
    server_id: int = 23

    @property
    def basic_auth(self) -> str:
        return f"{self.username}:{self.password}"

    @staticmethod
    def metadata_of(raw: bytes) -> dict[str, str]:
        """The ``Metadata`` Postmark records for a message (``raw``, as sent) that went through
        its SMTP service."""
        message = message_from_bytes(raw, policy=policy.default)
        prefix = "x-pm-metadata-"
        return {
            name[len(prefix) :]: str(value)
            for name, value in message.items()
            if name.lower().startswith(prefix)
        }

    def _at(self) -> str:
        return self.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%f0Z")

    def _common(self, record_type: str, metadata: dict[str, str] | None) -> dict[str, Any]:
        return {
            "RecordType": record_type,
            "MessageStream": "outbound",
            "MessageID": str(uuid.uuid4()),
            "ServerID": self.server_id,
            "Tag": "",
            "Metadata": dict(metadata or {}),
        }

    def bounce(
        self, email: str, *, type_: str = "HardBounce", metadata: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A ``Bounce`` record (``type_`` one of Postmark's bounce types), or with
        ``type_="SpamComplaint"`` a ``SpamComplaint`` record."""
        code, name = _BOUNCE_CODES[type_]
        record_type = "SpamComplaint" if type_ == "SpamComplaint" else "Bounce"
        return {
            **self._common(record_type, metadata),
            "ID": next(_ids),
            "Type": type_,
            "TypeCode": code,
            "Name": name,
            "Description": "The server was unable to deliver your message.",
            "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
            "Email": email,
            "From": "sender@example.com",
            "BouncedAt": self._at(),
            "DumpAvailable": True,
            "Inactive": type_ in {"HardBounce", "BadEmailAddress", "SpamComplaint"},
            "CanActivate": True,
            "Subject": "Test subject",
        }

    def spam_complaint(
        self, email: str, *, metadata: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return self.bounce(email, type_="SpamComplaint", metadata=metadata)

    def subscription_change(
        self,
        email: str,
        *,
        suppress: bool = True,
        reason: str | None = "ManualSuppression",
        metadata: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        return {
            **self._common("SubscriptionChange", metadata),
            "ChangedAt": self._at(),
            "Recipient": email,
            "Origin": "Recipient",
            "SuppressSending": suppress,
            "SuppressionReason": reason if suppress else None,
        }

    def delivery(self, email: str, *, metadata: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            **self._common("Delivery", metadata),
            "Recipient": email,
            "DeliveredAt": self._at(),
            "Details": "Test delivery webhook details",
        }

    def open(self, email: str, *, metadata: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            **self._common("Open", metadata),
            "FirstOpen": True,
            "Recipient": email,
            "ReceivedAt": self._at(),
            "Platform": "WebMail",
            "ReadSeconds": 5,
            "UserAgent": "Mozilla/5.0",
        }

    def click(
        self, email: str, link: str, *, metadata: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return {
            **self._common("Click", metadata),
            "Recipient": email,
            "ReceivedAt": self._at(),
            "Platform": "Desktop",
            "ClickLocation": "HTML",
            "OriginalLink": link,
            "UserAgent": "Mozilla/5.0",
        }

    def request(
        self, record: dict[str, Any], *, credentials: bool = True
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers Postmark would POST for ``record`` (without the webhook's
        credentials when ``credentials`` is false)."""
        headers = {"Content-Type": "application/json", "User-Agent": "Postmark"}
        if credentials:
            token = base64.b64encode(self.basic_auth.encode()).decode()
            headers["Authorization"] = f"Basic {token}"
            if self.header is not None:
                headers[self.header[0]] = self.header[1]
        return json.dumps(record).encode(), headers

    async def deliver(self, client: httpx.AsyncClient, record: dict[str, Any]) -> httpx.Response:
        """POST ``record`` to the webhook's URL with its credentials."""
        body, headers = self.request(record)
        return await client.post(self.url, content=body, headers=headers)
