"""What the ``send_sms`` action hands to a provider and what it gets back."""

from __future__ import annotations

from typing import Protocol

import msgspec


class SmsMessage(msgspec.Struct, frozen=True, kw_only=True):
    to: str
    """E.164 number (``+4915112345678``)."""
    body: str
    """Rendered text."""
    sender: str | None = None
    """Overrides the provider account's default sender (number or alphanumeric id)."""


class SmsReceipt(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    message_id: str
    """The provider's id for the message (kept on the outbox row to match delivery reports)."""
    status: str
    """The provider's word for it (``queued``, ``accepted``, …)."""


class SmsSender(Protocol):
    """Any SMS provider client."""

    async def send(
        self, message: SmsMessage, *, idempotency_key: str, previously_attempted: bool = False
    ) -> SmsReceipt:
        """Send once per ``idempotency_key``.

        ``previously_attempted`` tells the client an earlier delivery of this same effect may
        have reached the provider (the outbox row was tried before), so a client whose API has
        no idempotency keys looks for that message before sending again.
        """
        ...

    async def aclose(self) -> None: ...
