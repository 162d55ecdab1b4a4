"""Each provider's own signature scheme, verified over the raw request body (pure).

- **Stripe** (``Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]``): ``v1`` is the
  HMAC-SHA256, keyed with the endpoint's signing secret (the whole ``whsec_…`` string), of
  ``"<t>.<raw body>"``. Any ``v1`` may match (Stripe sends one per active secret while an
  endpoint's secret is being rolled); other schemes (``v0``) are ignored; a timestamp more than
  five minutes from now is refused, as Stripe's libraries do by default, so a captured request
  cannot be replayed later.
- **Cal.com** (``X-Cal-Signature-256: <hex>``): the HMAC-SHA256 of the raw body keyed with the
  webhook's secret. The scheme carries no timestamp header, so the body's own ``createdAt`` (set
  when Cal.com sends the event, and covered by the signature) must be within the same five
  minutes.
- **ours** (``X-Sweepline-Signature``): the Stripe convention with the source's own secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from datetime import datetime

import msgspec

from app.engines.funnels.events.tracking import SIGNATURE_TOLERANCE_SECONDS, body_refusal

STRIPE_HEADER = "stripe-signature"
CALCOM_HEADER = "x-cal-signature-256"
OUR_HEADER = "x-sweepline-signature"

HEADERS = {"stripe": STRIPE_HEADER, "calcom": CALCOM_HEADER, "sweepline": OUR_HEADER}
"""The header each provider signs in."""


class SignatureRefused(Exception):
    """Why a request is not from the source (answered 401, nothing stored)."""


def verify_timestamped(
    secret: str, body: bytes, header: str, now_unix: int, *, name: str = "signature"
) -> None:
    """A ``t=…,v1=…`` header (Stripe's scheme, and ours)."""
    refusal = body_refusal(secret, body, header, now_unix)
    if refusal is not None:
        raise SignatureRefused(f"the {name} header {refusal}")


def calcom_signature(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class _CalCreated(msgspec.Struct):
    createdAt: str = ""


def verify_calcom(secret: str, body: bytes, header: str, now: datetime) -> None:
    if not hmac.compare_digest(calcom_signature(secret, body), header.strip().lower()):
        raise SignatureRefused("the X-Cal-Signature-256 does not match the source's secret")
    try:
        created = msgspec.json.decode(body, type=_CalCreated).createdAt
        sent = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        raise SignatureRefused("a Cal.com event needs its createdAt time") from None
    if sent.tzinfo is None or abs((now - sent).total_seconds()) > SIGNATURE_TOLERANCE_SECONDS:
        raise SignatureRefused("the Cal.com event's createdAt is more than five minutes from now")


def verify(
    provider: str, secret: str, body: bytes, headers: Mapping[str, str], now: datetime
) -> None:
    """Raise :class:`SignatureRefused` unless ``body`` is signed by the source's provider."""
    name = HEADERS[provider]
    given = headers.get(name)
    if not given:
        raise SignatureRefused(f"the {name} header is missing")
    if provider == "calcom":
        verify_calcom(secret, body, given, now)
    else:
        verify_timestamped(secret, body, given, int(now.timestamp()), name=name)
