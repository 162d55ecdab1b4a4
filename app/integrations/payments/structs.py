"""Requests the ``create_payment`` action makes and the parts of Stripe's answers it reads."""

from __future__ import annotations

import msgspec


class PaymentIntentRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A PaymentIntent the contact will pay (amount in the currency's minor units)."""

    amount: int
    currency: str
    description: str | None = None
    receipt_email: str | None = None
    customer: str | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class CheckoutRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A hosted Checkout page for one product (``unit_amount`` in minor units)."""

    product_name: str
    unit_amount: int
    currency: str
    success_url: str
    quantity: int = 1
    cancel_url: str | None = None
    customer_email: str | None = None
    client_reference_id: str | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class PaymentIntent(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    object: str
    amount: int
    currency: str
    status: str
    client_secret: str | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class CheckoutSession(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    object: str
    payment_status: str
    url: str | None = None
    status: str | None = None
    amount_total: int | None = None
    currency: str | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
