"""Passwords (argon2), API keys and ingest tokens (random, stored as SHA-256), HMAC signatures."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()

API_KEY_PREFIX = "swl_"
INGEST_TOKEN_PREFIX = "swi_"  # noqa: S105 - a prefix, not a secret


def use_password_hasher(hasher: PasswordHasher) -> None:
    """Replace the hashing parameters. The test suite uses a cheap profile so that creating
    accounts does not dominate its run time; the service keeps argon2's recommended defaults."""
    global _hasher
    _hasher = hasher
    dummy_hash.cache_clear()


def hash_password(password: str) -> str:
    return str(_hasher.hash(password))


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return bool(_hasher.verify(password_hash, password))
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with weaker parameters than the current ones."""
    return bool(_hasher.check_needs_rehash(password_hash))


@functools.cache
def dummy_hash() -> str:
    """A hash to verify against when the account does not exist, so a sign-in attempt costs the
    same either way and its timing does not reveal which e-mails have accounts."""
    return hash_password(secrets.token_urlsafe(16))


def sha256_hex(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def new_ingest_token() -> str:
    return INGEST_TOKEN_PREFIX + secrets.token_urlsafe(32)


def key_prefix(key: str) -> str:
    return key[:12]


def sign(secret: str, body: bytes) -> str:
    """Hex HMAC-SHA256 of ``body``."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, signature: str) -> bool:
    given = signature.removeprefix("sha256=").strip()
    return hmac.compare_digest(sign(secret, body), given)
