"""The encryption key of secrets at rest comes from the environment; on the embedded default it is
generated once into a key file, with a clear log line."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from app.platform.crypto import SecretBox, load_or_create_keys


def test_keys_from_the_environment_are_used_as_given(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    keys = load_or_create_keys(key, "session", str(tmp_path / "k.json"), allow_generate=False)
    assert (keys.encryption_key, keys.session_secret) == (key, "session")
    assert not (tmp_path / "k.json").exists()


def test_embedded_default_generates_a_key_file_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "var" / "sweepline.key"
    with caplog.at_level(logging.WARNING):
        first = load_or_create_keys("", "", str(path), allow_generate=True)
    assert path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "generated a new encryption key" in caplog.text
    assert str(path) in caplog.text
    assert first.encryption_key not in caplog.text
    caplog.clear()
    second = load_or_create_keys("", "", str(path), allow_generate=True)
    assert second == first
    assert caplog.text == ""
    box = SecretBox(second.encryption_key)
    assert box.decrypt(SecretBox(first.encryption_key).encrypt("x")) == "x"


def test_server_mode_refuses_to_start_without_keys(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ENCRYPTION_KEY and SESSION_SECRET"):
        load_or_create_keys("", "", str(tmp_path / "absent.key"), allow_generate=False)
