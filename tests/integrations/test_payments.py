"""The Stripe-compatible payments client against its simulator (``create_payment`` action, FN-7:
every effect carries its idempotency key and a redelivery is recognised)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from app.integrations.http_guard import InvalidResponse, PermanentError, RetryPolicy, TransientError
from app.integrations.payments import (
    CheckoutRequest,
    PaymentIntentRequest,
    PaymentsClient,
)
from app.sandbox.payments import PaymentsSandbox
from tests.harness.provider_client import (
    ANSWER_TIMEOUT,
    SILENCE_TIMEOUT,
    ProviderSetup,
    Served,
    provider_setup,
    quick_retries,
    served_fixture,
)
from tests.harness.sleep import RecordingSleep

SECRET = "sk_test_workspace_7_abcdefghijklmnop"


class Setup(ProviderSetup[PaymentsSandbox, PaymentsClient]):
    def client_with(self, **kwargs: object) -> PaymentsClient:
        return PaymentsClient(base_url=self.url, **kwargs)  # type: ignore[arg-type]


def fresh_sandbox() -> PaymentsSandbox:
    return PaymentsSandbox(secret_keys={SECRET: "acct_7"})


def new_client(url: str, sleeps: RecordingSleep, timeout: float = ANSWER_TIMEOUT) -> PaymentsClient:
    return PaymentsClient(
        secret_key=SECRET,
        base_url=url,
        timeout=timeout,
        policy=quick_retries(sleeps),
    )


served = served_fixture(fresh_sandbox)


@pytest.fixture
async def stripe(served: Served[PaymentsSandbox]) -> AsyncIterator[Setup]:
    async with provider_setup(served, new_client) as setup:
        yield Setup(**vars(setup))


INTENT = PaymentIntentRequest(amount=4900, currency="EUR", metadata={"run": "17", "node": "pay"})


async def test_creates_a_payment_intent_on_the_workspace_account(stripe: Setup) -> None:
    intent = await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-1")
    assert intent.id.startswith("pi_")
    assert (intent.amount, intent.currency, intent.status) == (
        4900,
        "eur",
        "requires_payment_method",
    )
    assert intent.metadata == {"run": "17", "node": "pay"}
    assert intent.client_secret is not None
    assert stripe.sandbox.payment_intents[intent.id]["account"] == "acct_7"
    assert await stripe.client.get_payment_intent(intent.id) == intent


async def test_the_same_idempotency_key_returns_the_same_payment_once(stripe: Setup) -> None:
    """FN-7: a redelivered effect is recognised by the provider through its idempotency key."""
    first = await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-2")
    again = await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-2")
    assert again == first
    assert len(stripe.sandbox.payment_intents) == 1
    assert stripe.sandbox.state.count("payment_intents.create") == 2


async def test_a_reply_lost_after_the_payment_was_created_is_retried_without_a_second_payment(
    stripe: Setup,
) -> None:
    stripe.sandbox.lost.arm(times=1, status=502)
    intent = await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-3")
    assert len(stripe.sandbox.payment_intents) == 1
    assert intent.id in stripe.sandbox.payment_intents
    assert stripe.sandbox.state.count("payment_intents.create") == 2
    assert len(stripe.sandbox.ledger) == 1


async def test_a_reply_that_never_comes_is_a_timeout_and_the_retry_is_replayed(
    stripe: Setup,
) -> None:
    stripe.sandbox.lost.arm(times=1, status=200, delay_seconds=3.0)
    intent = await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-4")
    assert list(stripe.sandbox.payment_intents) == [intent.id]


async def test_transient_errors_are_retried(stripe: Setup) -> None:
    stripe.sandbox.state.inject("payment_intents.create", status=503, times=1)
    intent = await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-5")
    assert intent.id in stripe.sandbox.payment_intents
    assert stripe.sandbox.state.count("payment_intents.create") == 2
    assert len(stripe.sleeps.waits) == 1


async def test_retry_after_is_honoured(stripe: Setup) -> None:
    stripe.sandbox.state.inject(
        "payment_intents.create", status=429, headers={"Retry-After": "3"}, times=1
    )
    await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-6")
    assert stripe.sleeps.waits == [3.0]


async def test_a_long_retry_after_goes_back_to_the_caller(stripe: Setup) -> None:
    stripe.sandbox.state.inject(
        "payment_intents.create", status=429, headers={"Retry-After": "600"}, times=1
    )
    with pytest.raises(TransientError) as info:
        await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-7")
    assert info.value.retry_after == 600.0
    assert stripe.sleeps.waits == []
    assert stripe.sandbox.payment_intents == {}


async def test_stripe_should_retry_false_overrides_the_status(stripe: Setup) -> None:
    stripe.sandbox.state.inject(
        "payment_intents.create", status=500, headers={"Stripe-Should-Retry": "false"}, times=1
    )
    with pytest.raises(PermanentError):
        await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-8")
    assert stripe.sandbox.state.count("payment_intents.create") == 1


async def test_an_invalid_key_is_permanent_and_never_logged(
    stripe: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bad_secret = "sk_test_wrong_key_0123456789abcdef"
    client = stripe.client_with(secret_key=bad_secret, policy=RetryPolicy(sleep=stripe.sleeps))
    try:
        with pytest.raises(PermanentError) as info:
            await client.create_payment_intent(INTENT, idempotency_key="fx-9")
    finally:
        await client.aclose()
    assert info.value.status == 401
    assert stripe.sandbox.state.count("payment_intents.create") == 1
    assert bad_secret not in str(info.value)
    assert bad_secret not in caplog.text


async def test_a_bad_amount_is_permanent_and_names_the_parameter(stripe: Setup) -> None:
    with pytest.raises(PermanentError) as info:
        await stripe.client.create_payment_intent(
            PaymentIntentRequest(amount=0, currency="eur"), idempotency_key="fx-10"
        )
    assert info.value.status == 400
    assert info.value.code == "parameter_missing"
    assert stripe.sandbox.state.count("payment_intents.create") == 1
    assert stripe.sandbox.payment_intents == {}


async def test_a_key_reused_with_other_parameters_is_refused(stripe: Setup) -> None:
    await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-11")
    with pytest.raises(PermanentError) as info:
        await stripe.client.create_payment_intent(
            PaymentIntentRequest(amount=100, currency="eur"), idempotency_key="fx-11"
        )
    assert info.value.code == "idempotency_error"
    assert len(stripe.sandbox.payment_intents) == 1


async def test_garbage_is_a_clear_error(stripe: Setup) -> None:
    stripe.sandbox.state.inject("payment_intents.create", status=200, raw=b"<html>oops</html>")
    with pytest.raises(InvalidResponse, match="unexpected response body"):
        await stripe.client.create_payment_intent(INTENT, idempotency_key="fx-12")


async def test_a_provider_that_never_answers_is_a_transient_timeout(stripe: Setup) -> None:
    stripe.sandbox.state.inject("payment_intents.create", status=200, delay_seconds=3.0, times=-1)
    silent = new_client(stripe.url, stripe.sleeps, timeout=SILENCE_TIMEOUT)
    try:
        with pytest.raises(TransientError) as info:
            await silent.create_payment_intent(INTENT, idempotency_key="fx-13")
    finally:
        await silent.aclose()
    assert info.value.code == "timeout"
    assert stripe.sandbox.state.count("payment_intents.create") == 3


async def test_creates_a_checkout_session(stripe: Setup) -> None:
    request = CheckoutRequest(
        product_name="Annual plan",
        unit_amount=1500,
        quantity=2,
        currency="usd",
        success_url="https://shop.example.com/thanks",
        customer_email="ada@example.com",
        metadata={"run": "3"},
    )
    session = await stripe.client.create_checkout_session(request, idempotency_key="fx-14")
    again = await stripe.client.create_checkout_session(request, idempotency_key="fx-14")
    assert session == again
    assert session.amount_total == 3000
    assert session.payment_status == "unpaid"
    assert session.url is not None
    assert session.id in session.url
    assert len(stripe.sandbox.checkout_sessions) == 1
