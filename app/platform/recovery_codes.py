"""Recovery codes: ten single-use codes a person keeps on paper for the day their phone is gone.

They are shown once and stored as HMAC-SHA-256 keyed with a key derived from the instance's key:
a copy of the database alone does not let anyone test guesses offline. Codes are random (50
bits each), so a keyed fast hash is enough; a slow password hash would add nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from app.platform.crypto import SecretBox

COUNT = 10
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: read off paper without doubt
_GROUP = 5


def new_codes() -> list[str]:
    """``COUNT`` fresh codes, each two groups of five characters (``k7m2p-x9rtw``)."""
    return [
        "-".join("".join(secrets.choice(_ALPHABET) for _ in range(_GROUP)) for _ in range(2))
        for _ in range(COUNT)
    ]


def normalise(code: str) -> str:
    """What is compared: lower case, without the dash or spaces people may type."""
    return code.strip().lower().replace("-", "").replace(" ", "")


def looks_like_recovery_code(code: str) -> bool:
    cleaned = normalise(code)
    return len(cleaned) == 2 * _GROUP and all(c in _ALPHABET for c in cleaned)


def code_hash(box: SecretBox, code: str) -> str:
    return hmac.new(
        box.derive("two-factor-recovery-codes"), normalise(code).encode(), hashlib.sha256
    ).hexdigest()
