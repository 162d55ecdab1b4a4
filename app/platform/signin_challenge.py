"""The sign-in challenge: a short-lived signed token, carried in a cookie between the password
and the second step, saying whose password was right and what they must do next (enter a code,
or enrol). It opens nothing else: no session exists until the second step is done.

Signed with HMAC-SHA-256 under a key derived from the session secret; it carries no secret of
its own, and it expires after five minutes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

LIFETIME = timedelta(minutes=5)

Stage = Literal["code", "enrol"]
_STAGES: tuple[Stage, ...] = ("code", "enrol")


@dataclass(frozen=True, slots=True)
class Challenge:
    user_id: int
    stage: Stage
    next: str
    expires_at: int
    """Unix seconds."""


def _key(session_secret: str) -> bytes:
    return hmac.new(
        session_secret.encode(), b"sweepline:sign-in-challenge", hashlib.sha256
    ).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue(session_secret: str, *, user_id: int, stage: Stage, next: str, now: datetime) -> str:
    payload = json.dumps(
        {"u": user_id, "s": stage, "n": next, "e": int((now + LIFETIME).timestamp())},
        separators=(",", ":"),
    ).encode()
    mac = hmac.new(_key(session_secret), payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


def read(session_secret: str, token: str, now: datetime) -> Challenge | None:
    """The challenge in ``token`` when its signature holds and it has not expired."""
    body, _, signature = token.partition(".")
    try:
        payload = _unb64(body)
        given = _unb64(signature)
    except ValueError:
        return None
    expected = hmac.new(_key(session_secret), payload, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, given):
        return None
    try:
        data = json.loads(payload)
        challenge = Challenge(
            user_id=int(data["u"]), stage=data["s"], next=str(data["n"]), expires_at=int(data["e"])
        )
    except (ValueError, KeyError, TypeError):
        return None
    if challenge.stage not in _STAGES or challenge.expires_at <= now.timestamp():
        return None
    return challenge
