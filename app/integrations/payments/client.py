"""Client of a Stripe-compatible payments API, acting on the workspace's own account.

The workspace stays the merchant of record: each client is built with that workspace's secret key
(a workspace secret), never a platform key. Every create call carries the effect's idempotency key
in ``Idempotency-Key``, so a retried or redelivered effect returns the object created the first
time. Stripe's ``Stripe-Should-Retry`` header, when present, decides whether a failure is retried.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

from app.clock import Clock
from app.integrations.http_guard import (
    AddressGuard,
    InvalidResponse,
    ProviderHttp,
    RetryPolicy,
    decode,
)
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.payments.form import encode_form
from app.integrations.payments.structs import (
    CheckoutRequest,
    CheckoutSession,
    PaymentIntent,
    PaymentIntentRequest,
)

PROVIDER = "stripe"
DEFAULT_BASE_URL = "https://api.stripe.com"

T = TypeVar("T", PaymentIntent, CheckoutSession)


class PaymentsClient:
    """One workspace's connected payments account."""

    def __init__(
        self,
        *,
        secret_key: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 20.0,
        user_agent: str = USER_AGENT,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        guard: AddressGuard | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = ProviderHttp(
            provider=PROVIDER,
            base_url=base_url,
            headers={"Authorization": f"Bearer {secret_key}"},
            timeout=timeout,
            user_agent=user_agent,
            policy=policy,
            retry_hint_header="Stripe-Should-Retry",
            clock=clock,
            guard=guard,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def create_payment_intent(
        self, request: PaymentIntentRequest, *, idempotency_key: str
    ) -> PaymentIntent:
        params: dict[str, Any] = {
            "amount": request.amount,
            "currency": request.currency.lower(),
            "description": request.description,
            "receipt_email": request.receipt_email,
            "customer": request.customer,
            "metadata": request.metadata or None,
        }
        return await self._create(
            "/v1/payment_intents", params, idempotency_key, PaymentIntent, "payment_intent"
        )

    async def create_checkout_session(
        self, request: CheckoutRequest, *, idempotency_key: str
    ) -> CheckoutSession:
        params: dict[str, Any] = {
            "mode": "payment",
            "success_url": request.success_url,
            "cancel_url": request.cancel_url,
            "customer_email": request.customer_email,
            "client_reference_id": request.client_reference_id,
            "line_items": [
                {
                    "quantity": request.quantity,
                    "price_data": {
                        "currency": request.currency.lower(),
                        "unit_amount": request.unit_amount,
                        "product_data": {"name": request.product_name},
                    },
                }
            ],
            "metadata": request.metadata or None,
        }
        return await self._create(
            "/v1/checkout/sessions", params, idempotency_key, CheckoutSession, "checkout.session"
        )

    async def get_payment_intent(self, payment_intent_id: str) -> PaymentIntent:
        response = await self._http.send("GET", f"/v1/payment_intents/{payment_intent_id}")
        return self._checked(decode(response, PaymentIntent, provider=PROVIDER), "payment_intent")

    async def _create(
        self, path: str, params: dict[str, Any], key: str, type_: type[T], object_name: str
    ) -> T:
        response = await self._http.send(
            "POST", path, form=encode_form(params), idempotency_key=key
        )
        return self._checked(decode(response, type_, provider=PROVIDER), object_name)

    @staticmethod
    def _checked(obj: T, object_name: str) -> T:
        if obj.object != object_name:
            raise InvalidResponse(
                f"expected a {object_name}, got {obj.object!r}", provider=PROVIDER
            )
        return obj
