"""Stripe's side of webhook delivery, for the payments simulator: events signed exactly as
Stripe signs them, so the receiver is tested against the real scheme, not against itself.

Stripe sends each event as the raw JSON body of a POST with ``Stripe-Signature:
t=<unix seconds>,v1=<hex>``, where ``v1`` is the HMAC-SHA256 of ``"<t>.<body>"`` keyed with the
endpoint's signing secret (the whole ``whsec_…`` string). While an endpoint's secret is rolled,
Stripe keeps signing with the old secret too for a while: one ``v1`` per active secret
(:meth:`StripeEndpoint.roll`, :meth:`StripeEndpoint.expire_old`).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.clock import Clock, SystemClock


def stripe_signature_header(body: bytes, signing_secrets: list[str], timestamp: int) -> str:
    """The ``Stripe-Signature`` of ``body`` at ``timestamp``: one ``v1`` per active secret."""
    signed = f"{timestamp}.".encode() + body
    macs = [hmac.new(s.encode(), signed, hashlib.sha256).hexdigest() for s in signing_secrets]
    return ",".join([f"t={timestamp}", *(f"v1={mac}" for mac in macs)])


def new_signing_secret() -> str:
    return f"whsec_{secrets.token_urlsafe(24)}"


_event_ids = itertools.count(1)


@dataclass
class StripeEndpoint:
    """One webhook endpoint of the account: its URL and its active signing secrets."""

    url: str = ""
    secrets: list[str] = field(default_factory=lambda: [new_signing_secret()])
    clock: Clock = field(default_factory=SystemClock)

    @property
    def secret(self) -> str:
        """The newest secret (what the Stripe dashboard shows)."""
        return self.secrets[-1]

    def roll(self) -> str:
        """Start using a new secret; the old one keeps signing until :meth:`expire_old`."""
        self.secrets.append(new_signing_secret())
        return self.secret

    def expire_old(self) -> None:
        del self.secrets[:-1]

    def event(self, type_: str, obj: dict[str, Any]) -> dict[str, Any]:
        """A Stripe ``event`` object carrying ``obj``."""
        return {
            "id": f"evt_sandbox{next(_event_ids):014d}",
            "object": "event",
            "api_version": "2024-06-20",
            "created": int(self.clock.now().timestamp()),
            "data": {"object": obj},
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": type_,
        }

    def signed(
        self, event: dict[str, Any], *, at: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers Stripe would POST for ``event`` (signed at ``at``, else now)."""
        body = json.dumps(event, separators=(",", ":")).encode()
        timestamp = int(self.clock.now().timestamp()) if at is None else at
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "Stripe-Signature": stripe_signature_header(body, self.secrets, timestamp),
            "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        }
        return body, headers

    async def deliver(
        self, client: httpx.AsyncClient, event: dict[str, Any], *, at: int | None = None
    ) -> httpx.Response:
        """POST ``event`` to the endpoint's URL, signed (``client`` may be any transport)."""
        body, headers = self.signed(event, at=at)
        return await client.post(self.url, content=body, headers=headers)
