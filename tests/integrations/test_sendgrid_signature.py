"""FN-13a: SendGrid's Event Webhook signature is verified as SendGrid signs it: checked against
the sample verification key, signature, timestamp and payload SendGrid's own libraries test with
(so the scheme is the provider's, not only our simulator's), and refused when anything changes
or the timestamp is stale."""

from __future__ import annotations

import pytest

from app.integrations.mail.sendgrid import SendGridRefused, verify

PUBLIC_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7"
    "yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
)
SIGNATURE = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
TIMESTAMP = "1588788367"
PAYLOAD = b'{"category":"example_payload","event":"test_event","message_id":"message_id"}'


def test_fn13a_sendgrid_sample_signature_verifies() -> None:
    verify(PUBLIC_KEY, TIMESTAMP, SIGNATURE, PAYLOAD, int(TIMESTAMP) + 60)
    armoured = f"-----BEGIN PUBLIC KEY-----\n{PUBLIC_KEY}\n-----END PUBLIC KEY-----\n"
    verify(armoured, TIMESTAMP, SIGNATURE, PAYLOAD, int(TIMESTAMP))


@pytest.mark.parametrize(
    ("timestamp", "payload", "now", "why"),
    [
        (TIMESTAMP, PAYLOAD + b" ", int(TIMESTAMP), "does not verify"),
        ("1588788368", PAYLOAD, int(TIMESTAMP), "does not verify"),
        (TIMESTAMP, PAYLOAD, int(TIMESTAMP) + 15 * 60 + 1, "15 minutes"),
        (TIMESTAMP, PAYLOAD, int(TIMESTAMP) - 15 * 60 - 1, "15 minutes"),
    ],
)
def test_fn13a_sendgrid_changed_or_stale_is_refused(
    timestamp: str, payload: bytes, now: int, why: str
) -> None:
    with pytest.raises(SendGridRefused, match=why):
        verify(PUBLIC_KEY, timestamp, SIGNATURE, payload, now)


def test_fn13a_sendgrid_unusable_key_or_missing_headers_are_refused() -> None:
    with pytest.raises(SendGridRefused, match="unusable"):
        verify("not-a-key", TIMESTAMP, SIGNATURE, PAYLOAD, int(TIMESTAMP))
    with pytest.raises(SendGridRefused, match="headers are needed"):
        verify(PUBLIC_KEY, "", SIGNATURE, PAYLOAD, int(TIMESTAMP))
    with pytest.raises(SendGridRefused, match="does not verify"):
        verify(PUBLIC_KEY, TIMESTAMP, "%%%", PAYLOAD, int(TIMESTAMP))
