"""Time-based one-time passwords (RFC 6238) as authenticator apps make them: HMAC-SHA-1 over the
number of 30-second steps since the epoch, truncated to 6 digits (RFC 4226 dynamic truncation).

A code is accepted for the current step and one step either side, so a phone whose clock is a
little off, or a code typed just as it changed, still works. Each step is accepted once per
person: the caller keeps the last step used and a code of that step or an earlier one is refused,
so a code seen over someone's shoulder cannot be replayed.

Written with the standard library on purpose: the whole algorithm is a few lines, and the tests
check it against the RFC's vectors and against an independent implementation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from datetime import datetime
from urllib.parse import quote, urlencode

DIGITS = 6
STEP_SECONDS = 30
WINDOW_STEPS = 1
"""Steps accepted either side of the current one."""
SECRET_BYTES = 20
"""160 bits, the length RFC 4226 recommends for HMAC-SHA-1."""

_DIGESTS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}


def new_secret() -> str:
    """A random shared secret in base32 (what authenticator apps read), without padding."""
    return base64.b32encode(secrets.token_bytes(SECRET_BYTES)).decode().rstrip("=")


def secret_bytes(secret: str) -> bytes:
    """The key of a base32 secret; spaces and letter case are ignored, padding is optional."""
    cleaned = secret.replace(" ", "").upper()
    return base64.b32decode(cleaned + "=" * (-len(cleaned) % 8))


def hotp(key: bytes, counter: int, *, digits: int = DIGITS, digest: str = "sha1") -> str:
    """RFC 4226: the one-time password for ``counter``."""
    mac = hmac.new(key, struct.pack(">Q", counter), _DIGESTS[digest]).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF
    return str(value % 10**digits).zfill(digits)


def time_step(at: datetime) -> int:
    """The number of whole 30-second steps from the Unix epoch to ``at`` (timezone-aware)."""
    return int(at.timestamp()) // STEP_SECONDS


def code_at(secret: str, at: datetime, *, digits: int = DIGITS, digest: str = "sha1") -> str:
    return hotp(secret_bytes(secret), time_step(at), digits=digits, digest=digest)


def normalise_code(code: str) -> str:
    """What people type, as compared: spaces and dashes some apps show are dropped."""
    return code.replace(" ", "").replace("-", "").strip()


def looks_like_code(code: str) -> bool:
    cleaned = normalise_code(code)
    return len(cleaned) == DIGITS and cleaned.isascii() and cleaned.isdigit()


def matching_step(
    secret: str, code: str, at: datetime, *, last_used_step: int | None
) -> int | None:
    """The step ``code`` belongs to, when it is valid at ``at`` and newer than ``last_used_step``;
    ``None`` otherwise. Every candidate step is compared, in constant time, so the answer's
    timing does not tell which step nearly matched."""
    cleaned = normalise_code(code)
    if not looks_like_code(cleaned):
        return None
    key = secret_bytes(secret)
    now = time_step(at)
    found = None
    for step in range(now - WINDOW_STEPS, now + WINDOW_STEPS + 1):
        fresh = last_used_step is None or step > last_used_step
        if hmac.compare_digest(hotp(key, step), cleaned) and fresh and found is None:
            found = step
    return found


def provisioning_uri(secret: str, *, account: str, issuer: str) -> str:
    """The ``otpauth://`` address a QR code carries (Google Authenticator's key URI format)."""
    label = quote(f"{issuer}:{account}", safe="@:")
    query = urlencode(
        {
            "secret": secret,
            "issuer": issuer,
            "algorithm": "SHA1",
            "digits": DIGITS,
            "period": STEP_SECONDS,
        }
    )
    return f"otpauth://totp/{label}?{query}"
