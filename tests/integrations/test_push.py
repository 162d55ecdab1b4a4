"""The generic JSON push client against its simulator (``send_push``; FN-7)."""

from __future__ import annotations

import pytest

from app.integrations.http_guard import InvalidResponse, PermanentError, TransientError
from app.integrations.push import DeviceUnregistered, JsonPushClient, PushNotification
from app.sandbox.push import PushSandbox
from tests.harness.provider_client import (
    ANSWER_TIMEOUT,
    SILENCE_TIMEOUT,
    ProviderSetup,
    provider_fixtures,
    quick_retries,
)
from tests.harness.sleep import RecordingSleep

API_KEY = "push-key-of-workspace-5-abcdefgh"


Setup = ProviderSetup[PushSandbox, JsonPushClient]


def fresh_sandbox() -> PushSandbox:
    return PushSandbox(api_keys={API_KEY}, unregistered_tokens={"dead-token"})


def new_client(url: str, sleeps: RecordingSleep, timeout: float = ANSWER_TIMEOUT) -> JsonPushClient:
    return JsonPushClient(
        base_url=url,
        api_key=API_KEY,
        timeout=timeout,
        policy=quick_retries(sleeps),
    )


served, push = provider_fixtures(fresh_sandbox, new_client)


NOTE = PushNotification(
    device_token="fcm-token-1",
    title="Your cart misses you",
    body="Two items are waiting.",
    data={"cart": "81"},
    url="https://shop.example.com/cart",
)


async def test_sends_a_notification(push: Setup) -> None:
    receipt = await push.client.send(NOTE, idempotency_key="fx-1")
    assert receipt.status == "accepted"
    stored = push.sandbox.notifications[receipt.notification_id]
    assert stored["to"] == "fcm-token-1"
    assert stored["data"] == {"cart": "81"}
    assert stored["url"] == NOTE.url


async def test_a_redelivered_effect_is_one_notification(push: Setup) -> None:
    """FN-7: same idempotency key, same notification, shown once."""
    first = await push.client.send(NOTE, idempotency_key="fx-2")
    again = await push.client.send(NOTE, idempotency_key="fx-2")
    assert again == first
    assert len(push.sandbox.notifications) == 1


async def test_a_lost_reply_is_retried_without_a_second_notification(push: Setup) -> None:
    push.sandbox.lost.arm(times=1, status=500)
    receipt = await push.client.send(NOTE, idempotency_key="fx-3")
    assert list(push.sandbox.notifications) == [receipt.notification_id]
    assert push.sandbox.state.count("notifications.create") == 2


async def test_transient_errors_are_retried(push: Setup) -> None:
    push.sandbox.state.inject("notifications.create", status=502)
    await push.client.send(NOTE, idempotency_key="fx-4")
    assert push.sandbox.state.count("notifications.create") == 2
    assert len(push.sleeps.waits) == 1


async def test_an_unregistered_token_is_permanent(push: Setup) -> None:
    with pytest.raises(DeviceUnregistered) as info:
        await push.client.send(
            PushNotification(device_token="dead-token", title="Hi", body=""),
            idempotency_key="fx-5",
        )
    assert info.value.status == 410
    assert push.sandbox.state.count("notifications.create") == 1
    assert push.sleeps.waits == []


async def test_an_invalid_notification_is_permanent(push: Setup) -> None:
    with pytest.raises(PermanentError) as info:
        await push.client.send(
            PushNotification(device_token="t", title=" ", body="x"), idempotency_key="fx-6"
        )
    assert info.value.status == 422
    assert push.sandbox.state.count("notifications.create") == 1


async def test_garbage_and_silence_are_clear_errors(push: Setup) -> None:
    push.sandbox.state.inject("notifications.create", status=201, body=["not", "an", "object"])
    with pytest.raises(InvalidResponse):
        await push.client.send(NOTE, idempotency_key="fx-7")
    push.sandbox.state.inject("notifications.create", status=201, delay_seconds=3.0, times=-1)
    silent = new_client(push.sandbox.url, push.sleeps, timeout=SILENCE_TIMEOUT)
    try:
        with pytest.raises(TransientError) as info:
            await silent.send(NOTE, idempotency_key="fx-8")
    finally:
        await silent.aclose()
    assert info.value.code == "timeout"
    assert push.sandbox.notifications == {}
