"""The Twilio-shaped SMS client against its simulator.

Twilio has no idempotency key, so these tests pin down the client's reconciliation: a POST whose
fate is unknown is never repeated before the client has looked for the message it may have sent
(FN-7: a redelivery is recognised).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import pytest
from litestar import Litestar, Request, post
from litestar.params import FromPath

from app.integrations.http_guard import InvalidResponse, PermanentError
from app.integrations.sms import SmsMessage, TwilioSmsClient
from app.sandbox.base import SandboxState, serve_in_loop
from app.sandbox.sms import TwilioSandbox
from tests.harness.provider_client import (
    ANSWER_TIMEOUT,
    ProviderSetup,
    Served,
    provider_setup,
    quick_retries,
    served_fixture,
)
from tests.harness.sleep import RecordingSleep

SID = "AC" + "1" * 32
TOKEN = "twilio-auth-token-abcdef0123456789"
NUMBER = "+15005550006"


class Setup(ProviderSetup[TwilioSandbox, TwilioSmsClient]):
    def other_client(self, **kwargs: object) -> TwilioSmsClient:
        return twilio_client(self.url, self.sleeps, **kwargs)


def twilio_client(url: str, sleeps: RecordingSleep, **kwargs: object) -> TwilioSmsClient:
    options: dict[str, object] = {
        "account_sid": SID,
        "auth_token": TOKEN,
        "from_number": NUMBER,
        "base_url": url,
        "timeout": ANSWER_TIMEOUT,
        "policy": quick_retries(sleeps),
    }
    options.update(kwargs)
    return TwilioSmsClient(**options)  # type: ignore[arg-type]


def new_client(url: str, sleeps: RecordingSleep) -> TwilioSmsClient:
    return twilio_client(url, sleeps, status_callback="https://app.example.com/hooks/sms?w=3")


def fresh_sandbox() -> TwilioSandbox:
    return TwilioSandbox(accounts={SID: TOKEN})


served = served_fixture(fresh_sandbox)


@pytest.fixture
async def twilio(served: Served[TwilioSandbox]) -> AsyncIterator[Setup]:
    async with provider_setup(served, new_client) as setup:
        yield Setup(**vars(setup))


TEXT = SmsMessage(to="+14155550100", body="Your table is ready.")


async def test_sends_a_message_in_twilio_shape(twilio: Setup) -> None:
    receipt = await twilio.client.send(TEXT, idempotency_key="fx-1")
    assert receipt.provider == "twilio"
    assert receipt.message_id.startswith("SM")
    assert len(receipt.message_id) == 34
    assert receipt.status == "queued"
    [sent] = twilio.sandbox.messages
    assert (sent["to"], sent["from"], sent["body"]) == (TEXT.to, NUMBER, TEXT.body)
    assert twilio.sandbox.state.count("messages.list") == 0


async def test_the_status_callback_names_the_effect() -> None:
    """The key rides on StatusCallback so delivery reports map back to the outbox row."""
    state = SandboxState()
    seen: dict[str, str] = {}

    @post("/2010-04-01/Accounts/{sid:str}/Messages.json", status_code=201)
    async def capture(request: Request, sid: FromPath[str]) -> dict[str, str]:
        state.hit("create")
        form = await request.form()
        seen.update({k: str(v) for k, v in form.items()})
        seen["authorization"] = request.headers["authorization"]
        return {"sid": "SM" + "0" * 32, "status": "queued", "to": str(form["To"])}

    async with serve_in_loop(Litestar([capture])) as url:
        client = TwilioSmsClient(
            account_sid=SID,
            auth_token=TOKEN,
            from_number=NUMBER,
            status_callback="https://app.example.com/hooks/sms?w=3",
            base_url=url,
        )
        try:
            await client.send(TEXT, idempotency_key="outbox:42")
        finally:
            await client.aclose()
    callback = urlsplit(seen["StatusCallback"])
    assert parse_qs(callback.query) == {"w": ["3"], "effect": ["outbox:42"]}
    assert seen["authorization"] == "Basic " + base64.b64encode(f"{SID}:{TOKEN}".encode()).decode()


async def test_a_redelivered_effect_finds_the_message_already_sent(twilio: Setup) -> None:
    """FN-7: the outbox row was tried before, so the client looks before it sends."""
    first = await twilio.client.send(TEXT, idempotency_key="fx-2")
    again = await twilio.client.send(TEXT, idempotency_key="fx-2", previously_attempted=True)
    assert again == first
    assert len(twilio.sandbox.messages) == 1
    assert twilio.sandbox.state.count("messages.create") == 1


async def test_a_redelivery_that_never_reached_twilio_sends(twilio: Setup) -> None:
    await twilio.client.send(
        SmsMessage(to=TEXT.to, body="another text"), idempotency_key="fx-earlier"
    )
    receipt = await twilio.client.send(TEXT, idempotency_key="fx-3", previously_attempted=True)
    assert [m["sid"] for m in twilio.sandbox.messages][-1] == receipt.message_id
    assert len(twilio.sandbox.messages) == 2


async def test_a_reply_lost_after_sending_is_not_sent_twice(twilio: Setup) -> None:
    twilio.sandbox.lost.arm(times=1, status=502)
    receipt = await twilio.client.send(TEXT, idempotency_key="fx-4")
    assert [m["sid"] for m in twilio.sandbox.messages] == [receipt.message_id]
    assert twilio.sandbox.state.count("messages.create") == 1
    assert twilio.sandbox.state.count("messages.list") == 1


async def test_a_reply_that_never_comes_is_not_sent_twice(twilio: Setup) -> None:
    twilio.sandbox.lost.arm(times=1, status=201, delay_seconds=3.0)
    receipt = await twilio.client.send(TEXT, idempotency_key="fx-5")
    assert [m["sid"] for m in twilio.sandbox.messages] == [receipt.message_id]


async def test_a_5xx_before_sending_is_checked_then_retried(twilio: Setup) -> None:
    twilio.sandbox.state.inject("messages.create", status=503)
    await twilio.client.send(TEXT, idempotency_key="fx-6")
    assert len(twilio.sandbox.messages) == 1
    assert twilio.sandbox.state.count("messages.create") == 2
    assert twilio.sandbox.state.count("messages.list") == 1


async def test_rate_limiting_is_retried_without_a_lookup(twilio: Setup) -> None:
    """A 429 means Twilio refused the request, so it is safe to repeat as it is."""
    twilio.sandbox.state.inject(
        "messages.create",
        status=429,
        headers={"Retry-After": "2"},
        body={"code": 20429, "message": "Too Many Requests", "status": 429},
    )
    await twilio.client.send(TEXT, idempotency_key="fx-7")
    assert twilio.sleeps.waits == [2.0]
    assert twilio.sandbox.state.count("messages.list") == 0
    assert len(twilio.sandbox.messages) == 1


async def test_an_invalid_number_is_permanent(twilio: Setup) -> None:
    with pytest.raises(PermanentError) as info:
        await twilio.client.send(SmsMessage(to="12345", body="x"), idempotency_key="fx-8")
    assert (info.value.status, info.value.code) == (400, "21211")
    assert twilio.sandbox.state.count("messages.create") == 1


async def test_a_wrong_token_is_permanent_and_never_logged(
    twilio: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    client = twilio.other_client(auth_token="wrong-token-0123456789abcdef")
    try:
        with pytest.raises(PermanentError) as info:
            await client.send(TEXT, idempotency_key="fx-9")
    finally:
        await client.aclose()
    assert (info.value.status, info.value.code) == (401, "20003")
    assert "wrong-token-0123456789abcdef" not in caplog.text + str(info.value)
    assert twilio.sandbox.messages == []


async def test_messaging_service_sends_and_reconciles(twilio: Setup) -> None:
    client = twilio.other_client(from_number=None, messaging_service_sid="MG" + "2" * 32)
    try:
        first = await client.send(TEXT, idempotency_key="fx-10")
        again = await client.send(TEXT, idempotency_key="fx-10", previously_attempted=True)
    finally:
        await client.aclose()
    assert again == first
    assert first.status == "accepted"
    assert len(twilio.sandbox.messages) == 1


async def test_garbage_is_a_clear_error(twilio: Setup) -> None:
    twilio.sandbox.state.inject("messages.create", status=201, body={"unexpected": True})
    with pytest.raises(InvalidResponse):
        await twilio.client.send(TEXT, idempotency_key="fx-11")
