"""The generic JSON letter client against its simulator (``send_letter``; FN-7)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from app.clock import ManualClock
from app.integrations.http_guard import InvalidResponse, PermanentError, TransientError
from app.integrations.letter import JsonLetterClient, Letter, PostalAddress
from app.sandbox.letter import LetterSandbox
from tests.harness.provider_client import (
    ANSWER_TIMEOUT,
    SILENCE_TIMEOUT,
    ProviderSetup,
    provider_fixtures,
    quick_retries,
)
from tests.harness.sleep import RecordingSleep

API_KEY = "letter-key-of-workspace-9-abcdefgh"


Setup = ProviderSetup[LetterSandbox, JsonLetterClient]


def fresh_sandbox() -> LetterSandbox:
    return LetterSandbox(
        api_keys={API_KEY}, clock=ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    )


def new_client(
    url: str, sleeps: RecordingSleep, timeout: float = ANSWER_TIMEOUT
) -> JsonLetterClient:
    return JsonLetterClient(
        base_url=url,
        api_key=API_KEY,
        timeout=timeout,
        policy=quick_retries(sleeps),
    )


served, letters = provider_fixtures(fresh_sandbox, new_client)


ADA = PostalAddress(
    name="Ada Lovelace",
    line1="12 St James's Square",
    city="London",
    postal_code="SW1Y 4JH",
    country="GB",
)
LETTER = Letter(to=ADA, content="<p>Dear Ada, thank you for ten years.</p>", color=True)


async def test_sends_a_letter(letters: Setup) -> None:
    receipt = await letters.client.send(LETTER, idempotency_key="fx-1")
    assert receipt.status == "accepted"
    assert receipt.expected_delivery_date == date(2026, 3, 6)
    stored = letters.sandbox.letters[receipt.letter_id]
    assert stored["to"]["postal_code"] == "SW1Y 4JH"
    assert stored["color"] is True


async def test_a_redelivered_effect_prints_one_letter(letters: Setup) -> None:
    """FN-7: same idempotency key, one letter printed and paid for."""
    first = await letters.client.send(LETTER, idempotency_key="fx-2")
    again = await letters.client.send(LETTER, idempotency_key="fx-2")
    assert again == first
    assert len(letters.sandbox.letters) == 1


async def test_a_reply_lost_in_a_timeout_is_retried_without_a_second_letter(
    letters: Setup,
) -> None:
    letters.sandbox.lost.arm(times=1, status=201, delay_seconds=3.0)
    receipt = await letters.client.send(LETTER, idempotency_key="fx-3")
    assert list(letters.sandbox.letters) == [receipt.letter_id]
    assert letters.sandbox.state.count("letters.create") == 2


async def test_transient_errors_are_retried(letters: Setup) -> None:
    letters.sandbox.state.inject("letters.create", status=503, headers={"Retry-After": "1"})
    await letters.client.send(LETTER, idempotency_key="fx-4")
    assert letters.sleeps.waits == [1.0]
    assert len(letters.sandbox.letters) == 1


async def test_an_incomplete_address_is_permanent(letters: Setup) -> None:
    bad = Letter(
        to=PostalAddress(name="Ada", line1="1 Road", city="", postal_code="1", country="GB"),
        content="<p>x</p>",
    )
    with pytest.raises(PermanentError, match=r"to\.city is required"):
        await letters.client.send(bad, idempotency_key="fx-5")
    assert letters.sandbox.state.count("letters.create") == 1
    assert letters.sandbox.letters == {}


async def test_garbage_and_silence_are_clear_errors(letters: Setup) -> None:
    letters.sandbox.state.inject(
        "letters.create",
        status=201,
        body={"id": "ltr_1", "status": "accepted", "expected_delivery_date": "soon"},
    )
    with pytest.raises(InvalidResponse):
        await letters.client.send(LETTER, idempotency_key="fx-6")
    letters.sandbox.state.inject("letters.create", status=201, delay_seconds=3.0, times=-1)
    silent = new_client(letters.sandbox.url, letters.sleeps, timeout=SILENCE_TIMEOUT)
    try:
        with pytest.raises(TransientError):
            await silent.send(LETTER, idempotency_key="fx-7")
    finally:
        await silent.aclose()
    assert letters.sandbox.letters == {}
