"""The generic JSON SMS client against its simulator (``send_sms``; FN-7: one effect, one
message, however often it is delivered)."""

from __future__ import annotations

import pytest

from app.integrations.http_guard import InvalidResponse, PermanentError, RetryPolicy, TransientError
from app.integrations.sms import JsonSmsClient, SmsMessage
from app.sandbox.sms import SmsSandbox
from tests.harness.provider_client import (
    ANSWER_TIMEOUT,
    SILENCE_TIMEOUT,
    ProviderSetup,
    provider_fixtures,
    quick_retries,
)
from tests.harness.sleep import RecordingSleep

API_KEY = "sms-key-of-workspace-3-0123456789"


Setup = ProviderSetup[SmsSandbox, JsonSmsClient]


def fresh_sandbox() -> SmsSandbox:
    return SmsSandbox(api_keys={API_KEY})


def new_client(url: str, sleeps: RecordingSleep, timeout: float = ANSWER_TIMEOUT) -> JsonSmsClient:
    return JsonSmsClient(
        base_url=url,
        api_key=API_KEY,
        default_sender="Sweepline",
        timeout=timeout,
        policy=quick_retries(sleeps),
    )


served, sms = provider_fixtures(fresh_sandbox, new_client)


HELLO = SmsMessage(to="+4915112345678", body="Hello Ada, your order shipped.")


async def test_sends_a_message(sms: Setup) -> None:
    receipt = await sms.client.send(HELLO, idempotency_key="fx-1")
    assert receipt.provider == "sms"
    assert receipt.status == "queued"
    stored = sms.sandbox.messages[receipt.message_id]
    assert (stored["to"], stored["from"], stored["body"]) == (HELLO.to, "Sweepline", HELLO.body)


async def test_a_redelivered_effect_is_one_message(sms: Setup) -> None:
    """FN-7: the provider recognises the idempotency key of a redelivered effect."""
    first = await sms.client.send(HELLO, idempotency_key="fx-2")
    again = await sms.client.send(HELLO, idempotency_key="fx-2", previously_attempted=True)
    assert again == first
    assert len(sms.sandbox.messages) == 1
    assert sms.sandbox.state.count("messages.create") == 2


async def test_a_lost_reply_is_retried_without_a_second_message(sms: Setup) -> None:
    sms.sandbox.lost.arm(times=1, status=502)
    receipt = await sms.client.send(HELLO, idempotency_key="fx-3")
    assert list(sms.sandbox.messages) == [receipt.message_id]
    assert sms.sandbox.state.count("messages.create") == 2


async def test_transient_errors_are_retried_honouring_retry_after(sms: Setup) -> None:
    sms.sandbox.state.inject("messages.create", status=429, headers={"Retry-After": "4"})
    sms.sandbox.state.inject("messages.create", status=503)
    await sms.client.send(HELLO, idempotency_key="fx-4")
    assert sms.sandbox.state.count("messages.create") == 3
    assert sms.sleeps.waits[0] == 4.0
    assert len(sms.sleeps.waits) == 2
    assert len(sms.sandbox.messages) == 1


async def test_an_invalid_number_is_permanent_and_not_retried(sms: Setup) -> None:
    with pytest.raises(PermanentError) as info:
        await sms.client.send(SmsMessage(to="0151 1234", body="hi"), idempotency_key="fx-5")
    assert info.value.status == 422
    assert info.value.code == "invalid_number"
    assert sms.sandbox.state.count("messages.create") == 1
    assert sms.sleeps.waits == []


async def test_a_wrong_api_key_is_permanent(sms: Setup) -> None:
    client = JsonSmsClient(base_url=sms.url, api_key="nope", policy=RetryPolicy(sleep=sms.sleeps))
    try:
        with pytest.raises(PermanentError) as info:
            await client.send(HELLO, idempotency_key="fx-6")
    finally:
        await client.aclose()
    assert info.value.status == 401
    assert sms.sandbox.messages == {}


async def test_a_key_reused_for_another_text_is_refused(sms: Setup) -> None:
    await sms.client.send(HELLO, idempotency_key="fx-7")
    with pytest.raises(PermanentError) as info:
        await sms.client.send(SmsMessage(to=HELLO.to, body="other"), idempotency_key="fx-7")
    assert info.value.code == "idempotency_key_reused"


async def test_garbage_is_a_clear_error(sms: Setup) -> None:
    sms.sandbox.state.inject("messages.create", status=201, raw=b"\x00\xffnot json")
    with pytest.raises(InvalidResponse):
        await sms.client.send(HELLO, idempotency_key="fx-8")


async def test_a_provider_that_never_answers_is_a_transient_timeout(sms: Setup) -> None:
    sms.sandbox.state.inject("messages.create", status=201, delay_seconds=3.0, times=-1)
    silent = new_client(sms.url, sms.sleeps, timeout=SILENCE_TIMEOUT)
    try:
        with pytest.raises(TransientError) as info:
            await silent.send(HELLO, idempotency_key="fx-9")
    finally:
        await silent.aclose()
    assert info.value.code == "timeout"
    assert sms.sandbox.state.count("messages.create") == 3
    assert sms.sandbox.messages == {}


async def test_an_unreachable_provider_is_transient_and_marked_not_sent() -> None:
    from app.sandbox.base import free_port

    client = JsonSmsClient(
        base_url=f"http://127.0.0.1:{free_port()}",
        api_key=API_KEY,
        policy=RetryPolicy(attempts=1),
    )
    try:
        with pytest.raises(TransientError) as info:
            await client.send(HELLO, idempotency_key="fx-10")
    finally:
        await client.aclose()
    assert info.value.code == "not_sent"
