"""Encryption of secrets at rest (Fernet: AES-128-CBC + HMAC-SHA256) and the embedded key file."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

log = logging.getLogger(__name__)


class SecretBoxError(RuntimeError):
    """A secret could not be decrypted (wrong key or corrupted value)."""


class SecretBox:
    def __init__(self, key: str) -> None:
        self._fernet = Fernet(key.encode())
        self._key = key.encode()

    def derive(self, purpose: str) -> bytes:
        """A key for one purpose (e.g. keyed hashes), derived from the instance key: the
        encryption key itself is never used for anything but encryption."""
        return hmac.new(self._key, f"sweepline:{purpose}".encode(), hashlib.sha256).digest()

    def encrypt(self, plaintext: str) -> bytes:
        return self._fernet.encrypt(plaintext.encode())

    def decrypt(self, ciphertext: bytes) -> str:
        try:
            return self._fernet.decrypt(ciphertext).decode()
        except InvalidToken as exc:
            raise SecretBoxError("secret cannot be decrypted with the configured key") from exc


@dataclass(frozen=True, slots=True)
class Keys:
    encryption_key: str
    session_secret: str


def load_or_create_keys(
    encryption_key: str, session_secret: str, key_file: str, *, allow_generate: bool
) -> Keys:
    """Keys from the environment, else from the key file, else generated into it (embedded mode)."""
    if encryption_key and session_secret:
        return Keys(encryption_key, session_secret)
    path = Path(key_file)
    stored: dict[str, str] = {}
    if path.exists():
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)  # a key file copied in with looser permissions
        stored = json.loads(path.read_text())
    elif not allow_generate:
        raise RuntimeError("ENCRYPTION_KEY and SESSION_SECRET must be set in server mode")
    if not stored:
        stored = {
            "encryption_key": Fernet.generate_key().decode(),
            "session_secret": secrets.token_urlsafe(48),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(stored, fh)
        log.warning(
            "generated a new encryption key in %s - back this file up: secrets stored in the "
            "database cannot be read without it",
            path,
        )
    return Keys(
        encryption_key or stored["encryption_key"], session_secret or stored["session_secret"]
    )
