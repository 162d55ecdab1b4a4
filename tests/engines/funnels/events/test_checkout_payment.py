"""FN-13b: a Stripe Checkout Session's ``checkout.session.completed`` becomes ``payment_made``
for the contact whose address the customer typed on the hosted page (``customer_details.email``;
the session's ``customer_email`` is ``null`` when it was created without one), with
``amount_minor`` from ``amount_total`` and its ``currency``, so a payment trigger's amount and
currency conditions apply. The session is created over HTTP at the payments simulator and the
event is signed and posted as Stripe does, to a Stripe webhook source of the workspace."""

from __future__ import annotations

import httpx
from sqlalchemy import select

from app.engines.funnels.models import Contact, ContactEvent
from app.runtime import Runtime
from app.sandbox.base import ThreadedServer
from app.sandbox.payments import PaymentsSandbox, create_payments_app
from tests.conftest import auth
from tests.engines.funnels.factories import (
    contact,
    graph,
    node,
    published,
    runs_of,
    settle,
    setup_names,
)
from tests.factories import Tenant


async def _sessions(stripe: PaymentsSandbox, *carts: tuple[int, int]) -> list[str]:
    """Checkout Sessions of one line item each, ``(unit_amount, quantity)`` in EUR, created
    without ``customer_email``."""
    ids = []
    with ThreadedServer(create_payments_app(stripe)) as server:
        async with httpx.AsyncClient(base_url=server.url) as api:
            for unit, quantity in carts:
                made = await api.post(
                    "/v1/checkout/sessions",
                    data={
                        "mode": "payment",
                        "success_url": "https://shop.example/thanks",
                        "line_items[0][price_data][currency]": "eur",
                        "line_items[0][price_data][unit_amount]": str(unit),
                        "line_items[0][price_data][product_data][name]": "Course",
                        "line_items[0][quantity]": str(quantity),
                    },
                    headers={"Authorization": "Bearer sk_test_sandbox"},
                )
                assert made.status_code == 200, made.text
                assert made.json()["customer_email"] is None
                ids.append(made.json()["id"])
    return ids


async def test_fn13b_checkout_session_names_its_contact_by_customer_details_with_amount(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    ws = tenant.workspace_id
    stripe = PaymentsSandbox(clock=runtime.clock)
    stripe.webhooks.clock = runtime.clock
    source = await client.post(
        "/api/v1/funnels/sources",
        json={"name": "Stripe", "provider": "stripe", "secret": stripe.webhooks.secret},
        headers=auth(tenant),
    )
    assert source.status_code == 201, source.text
    stripe.webhooks.url = "/hooks/funnels/sources/" + source.json()["url"].rsplit("/", 1)[1]
    await setup_names(runtime, ws, tags=["buyer"])
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            node("add_tag", "t", tag="buyer"),
            triggers=[{"kind": "payment_made", "min_amount_minor": 5000, "currency": "eur"}],
        ),
    )
    payer = await contact(runtime, ws, "payer@example.com")
    await contact(runtime, ws, "small@example.com")
    big, small = await _sessions(stripe, (2500, 2), (1000, 1))

    completed = stripe.complete_checkout(big, email="payer@example.com")
    obj = completed["data"]["object"]
    assert (obj["customer_email"], obj["amount_total"], obj["currency"]) == (None, 5000, "eur")
    got = await stripe.webhooks.deliver(client, completed)
    assert got.status_code == 202, got.text
    assert got.json()["stored"] is True
    cheap = stripe.complete_checkout(small, email="small@example.com")
    assert (await stripe.webhooks.deliver(client, cheap)).status_code == 202
    await settle(runtime)

    async with runtime.db.read() as s:
        emails = {c.id: c.email for c in await s.scalars(select(Contact))}
        paid = {
            emails[e.contact_id]: e.properties
            for e in await s.scalars(
                select(ContactEvent).where(ContactEvent.name == "payment_made")
            )
        }
    # No contact was created: each payment is about the contact its address names.
    assert sorted(str(e) for e in emails.values()) == ["payer@example.com", "small@example.com"]
    assert paid["payer@example.com"] == {"payment_id": big, "amount_minor": 5000, "currency": "eur"}
    assert paid["small@example.com"]["amount_minor"] == 1000
    # The trigger's amount condition used it: only the 50-euro payer entered.
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [payer]
