"""Webhook sources in a real headless Chromium, with no JSON typed: a Stripe source added from
its form with the endpoint's signing secret, then a payment event signed by the payments
simulator as Stripe signs it and delivered over loopback HTTP to the URL the page shows; a Cal.com
source whose generated secret is shown once and gone on the next visit."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.engines.funnels.events.models import InboundEvent
from app.runtime import Runtime
from app.sandbox.payments import PaymentsSandbox

pytestmark = pytest.mark.browser


async def test_a_stripe_source_from_its_form_receives_what_stripe_signs(
    signed_in_page: Any, live_url: str, runtime: Runtime
) -> None:
    page = signed_in_page
    stripe = PaymentsSandbox(clock=runtime.clock)
    stripe.webhooks.clock = runtime.clock
    await page.goto(f"{live_url}/ui/workspace")
    await page.click("#settings-nav >> text=Webhook sources")
    form = page.locator("#source-form")
    await form.locator("input[name=name]").fill("Stripe live")
    await form.locator("select[name=kind]").select_option("stripe")
    await form.locator("input[name=secret]").fill("not-a-stripe-secret")
    await form.locator("button[type=submit]").click()
    assert (await page.locator("#source-error").inner_text()).startswith("Signing secret: ")
    assert await page.locator("#source-form input[name=name]").input_value() == "Stripe live"

    form = page.locator("#source-form")
    await form.locator("input[name=secret]").fill(stripe.webhooks.secret)
    await form.locator("button[type=submit]").click()
    assert "added" in await page.locator("#notice").inner_text()
    assert stripe.webhooks.secret not in await page.content()
    row = page.locator('tr[data-source="Stripe live"]')
    shown = (await row.locator("code").inner_text()).strip()
    # The page gives the provider the public URL (PUBLIC_URL); here that is the live server.
    public = runtime.settings.web.public_url.rstrip("/")
    assert shown.startswith(f"{public}/hooks/funnels/sources/src_")
    stripe.webhooks.url = live_url + shown.removeprefix(public)

    event = stripe.webhooks.event(
        "payment_intent.succeeded",
        {"id": "pi_1", "amount": 900, "currency": "eur", "receipt_email": "ann@example.com"},
    )
    async with httpx.AsyncClient() as http:
        answer = await stripe.webhooks.deliver(http, event)
        assert answer.status_code == 202, answer.text
        other = PaymentsSandbox(clock=runtime.clock).webhooks  # another endpoint's secret
        other.url, other.clock = stripe.webhooks.url, runtime.clock
        assert (await other.deliver(http, event)).status_code == 401
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(InboundEvent)) == 1


async def test_a_generated_secret_is_shown_once(signed_in_page: Any, live_url: str) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/workspace/webhook-sources")
    form = page.locator("#source-form")
    await form.locator("input[name=name]").fill("Bookings")
    await form.locator("select[name=kind]").select_option("calcom")
    await form.locator("button[type=submit]").click()
    secret = (await page.locator("#new-secret").inner_text()).strip()
    assert len(secret) > 20
    await page.goto(f"{live_url}/ui/workspace/webhook-sources")
    assert await page.locator("#new-secret").count() == 0
    assert secret not in await page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    await page.click('tr[data-source="Bookings"] form[action$="/delete"] button')
    assert "removed" in await page.locator("#notice").inner_text()
