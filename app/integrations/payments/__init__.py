"""Payments through the workspace's own Stripe-compatible account (the ``create_payment`` action).

How the executor calls it, with the workspace's secret key read from its secrets::

    client = PaymentsClient(secret_key=key, base_url=settings_or_default)
    intent = await client.create_payment_intent(
        PaymentIntentRequest(amount=4900, currency="eur", metadata={"run": str(run_id)}),
        idempotency_key=outbox_row.idempotency_key,
    )
    # or: session = await client.create_checkout_session(CheckoutRequest(...), idempotency_key=…)
    run_context[node_id] = {"payment_intent": intent.id, "client_secret": intent.client_secret}

The same idempotency key always yields the same object (the provider replays it), so a redelivered
effect charges nothing twice. Failures are :class:`~app.integrations.http_guard.TransientError`
(retry later with the same key) or :class:`~app.integrations.http_guard.PermanentError` (a bad key,
a bad amount: record and stop). Build one client per workspace key and cache it, e.g. in
``ctx.resources`` under a key derived from the workspace id.
"""

from app.integrations.payments.client import DEFAULT_BASE_URL, PaymentsClient
from app.integrations.payments.structs import (
    CheckoutRequest,
    CheckoutSession,
    PaymentIntent,
    PaymentIntentRequest,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "CheckoutRequest",
    "CheckoutSession",
    "PaymentIntent",
    "PaymentIntentRequest",
    "PaymentsClient",
]
