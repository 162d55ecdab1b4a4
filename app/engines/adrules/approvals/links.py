"""The approval link of a run's digest: signed with the workspace's webhook secret (the key the
application signs its links and webhooks with, encrypted at rest) and expiring with the run's
approval window. Rotating the workspace secret invalidates every outstanding link.

A token is ``<base64url(json claims)>.<base64url(HMAC-SHA256)>``; the claims name the workspace
(``w``), the run (``b``) and the expiry (``e``, Unix seconds). The link opens a page that asks
before it acts: a chat client fetching the link to preview it approves nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime

ROUTE_PREFIX = "/hooks/adrules/approve/"
_PURPOSE = b"adrules.approve:"


@dataclass(frozen=True, slots=True)
class ApprovalClaims:
    workspace_id: int
    batch_id: str
    expires_at: datetime


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, body: str) -> str:
    return _b64(hmac.new(secret.encode(), _PURPOSE + body.encode(), hashlib.sha256).digest())


def sign(secret: str, *, workspace_id: int, batch_id: str, expires_at: datetime) -> str:
    claims = {"w": workspace_id, "b": batch_id, "e": int(expires_at.timestamp())}
    body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{body}.{_mac(secret, body)}"


def unverified(token: str) -> ApprovalClaims | None:
    """What a token claims (to find the workspace's secret), or None when it is malformed."""
    body, dot, _ = token.partition(".")
    if not dot or len(token) > 500:
        return None
    try:
        claims = json.loads(_unb64(body))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(claims, dict):
        return None
    w, b, e = claims.get("w"), claims.get("b"), claims.get("e")
    if not isinstance(w, int) or not isinstance(b, str) or not isinstance(e, int):
        return None
    return ApprovalClaims(w, b, datetime.fromtimestamp(e, UTC))


def verify(secret: str, token: str, now: datetime) -> ApprovalClaims | None:
    """The token's claims when its signature holds and it has not expired, else None."""
    claims = unverified(token)
    if claims is None:
        return None
    body, _, mac = token.partition(".")
    if not hmac.compare_digest(_mac(secret, body), mac):
        return None
    if claims.expires_at <= now:
        return None
    return claims


def approve_url(public_url: str, token: str) -> str:
    return f"{public_url.rstrip('/')}{ROUTE_PREFIX}{token}"
