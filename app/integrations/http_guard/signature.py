"""The signature of the webhooks the product sends: ``t=<unix seconds>,v1=<hex HMAC-SHA256 of
"<t>.<body>">`` in one header, so a receiver can check who sent the body and refuse a replay (the
timestamp is signed with it)."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Sweepline-Signature"


def sign_webhook(secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify_webhook(
    secret: str, header: str, body: bytes, *, now: int, tolerance_seconds: int = 300
) -> bool:
    """What a receiver does: recompute the HMAC and refuse old timestamps (replays)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance_seconds:
        return False
    expected = sign_webhook(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))
