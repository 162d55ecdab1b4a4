"""Webhook sources (FN-13): payment and booking providers verified with their own signature
scheme and a per-source secret — Stripe's ``Stripe-Signature`` as the payments simulator signs it
(the endpoint's ``whsec_`` secret, several ``v1`` while a secret is rolled, five minutes of
tolerance), Cal.com's ``X-Cal-Signature-256``, and ours with a generated secret. Configured
through the API (create, list, rotate, delete); secrets encrypted, never shown after creation. A
bad or replayed signature is a 401 and stores nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import func, select

from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.events.sources.models import WebhookSource
from app.engines.funnels.models import Contact, ContactEvent
from app.runtime import Runtime
from app.sandbox.base import ThreadedServer
from app.sandbox.payments import PaymentsSandbox, create_payments_app
from tests.conftest import auth
from tests.engines.funnels.factories import settle, signed
from tests.factories import Tenant

API = "/api/v1/funnels/sources"


async def _stored(runtime: Runtime) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(InboundEvent)) or 0)


async def _source(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    got = await client.post(API, json=body, headers=auth(tenant))
    assert got.status_code == 201, got.text
    created: dict[str, Any] = got.json()
    return created


def _path(source: dict[str, Any]) -> str:
    return "/hooks/funnels/sources/" + source["url"].rsplit("/", 1)[1]


async def test_stripe_source_verifies_what_the_payments_simulator_signs(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    stripe = PaymentsSandbox(clock=runtime.clock)
    stripe.webhooks.clock = runtime.clock
    refused = await client.post(
        API, json={"name": "Stripe", "provider": "stripe"}, headers=auth(tenant)
    )
    assert refused.status_code == 422
    assert "whsec_" in refused.text
    source = await _source(
        client, tenant, name="Stripe", provider="stripe", secret=stripe.webhooks.secret
    )
    assert (source["receives"], source["signature_header"]) == ("payment", "stripe-signature")
    assert source["secret"] is None  # pasted in: never echoed
    stripe.webhooks.url = _path(source)

    with ThreadedServer(create_payments_app(stripe)) as server:
        async with httpx.AsyncClient(base_url=server.url) as api:
            made = await api.post(
                "/v1/payment_intents",
                data={"amount": "4200", "currency": "eur", "receipt_email": "payer@example.com"},
                headers={"Authorization": "Bearer sk_test_sandbox"},
            )
    event = stripe.pay(made.json()["id"])
    got = await stripe.webhooks.deliver(client, event)
    assert got.status_code == 202, got.text
    assert got.json()["stored"] is True
    again = await stripe.webhooks.deliver(client, event)  # Stripe retries: stored once
    assert again.json()["stored"] is False
    await settle(runtime)
    async with runtime.db.read() as s:
        payer = await s.scalar(select(Contact).where(Contact.email == "payer@example.com"))
        assert payer is not None
        [paid] = list(
            await s.scalars(select(ContactEvent).where(ContactEvent.name == "payment_made"))
        )
    assert paid.contact_id == payer.id
    assert (paid.properties["amount_minor"], paid.properties["currency"]) == (4200, "eur")

    # A captured delivery replayed six minutes later, a forged one, and one signed with the
    # workspace's own secret instead of the endpoint's: refused, nothing stored.
    body, headers = stripe.webhooks.signed(
        stripe.webhooks.event("charge.succeeded", {"id": "ch_1"})
    )
    runtime.clock.advance(minutes=6)  # type: ignore[attr-defined]
    late = await client.post(stripe.webhooks.url, content=body, headers=headers)
    assert late.status_code == 401
    assert "five minutes" in late.json()["message"]
    fresh_body, fresh = stripe.webhooks.signed(stripe.webhooks.event("charge.succeeded", {}))
    forged = {**fresh, "Stripe-Signature": fresh["Stripe-Signature"][:-4] + "0000"}
    assert (
        await client.post(stripe.webhooks.url, content=fresh_body, headers=forged)
    ).status_code == 401
    at = int(runtime.clock.now().timestamp())
    ours, ours_headers = signed(tenant.webhook_secret, event, at=at, header="Stripe-Signature")
    assert (
        await client.post(stripe.webhooks.url, content=ours, headers=ours_headers)
    ).status_code == 401
    assert await _stored(runtime) == 1


async def test_a_rolled_stripe_secret_and_our_rotation(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """While Stripe rolls the endpoint's secret it signs with both (two ``v1``): the old stored
    secret still verifies; after rotating ours to the new one, only the new secret does."""
    stripe = PaymentsSandbox(clock=runtime.clock)
    stripe.webhooks.clock = runtime.clock
    old = stripe.webhooks.secret
    source = await _source(client, tenant, name="Stripe", provider="stripe", secret=old)
    stripe.webhooks.url = _path(source)
    stripe.webhooks.roll()
    body, headers = stripe.webhooks.signed(stripe.webhooks.event("payment_intent.succeeded", {}))
    assert headers["Stripe-Signature"].count("v1=") == 2
    assert (
        await client.post(stripe.webhooks.url, content=body, headers=headers)
    ).status_code == 202
    rotated = await client.post(
        f"{API}/{source['id']}/rotate",
        json={"secret": stripe.webhooks.secret},
        headers=auth(tenant),
    )
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["secret"] is None
    stripe.webhooks.expire_old()
    event = stripe.webhooks.event("payment_intent.succeeded", {})
    assert (await stripe.webhooks.deliver(client, event)).status_code == 202
    stale = PaymentsSandbox(clock=runtime.clock).webhooks
    stale.secrets, stale.url, stale.clock = [old], stripe.webhooks.url, runtime.clock
    assert (
        await stale.deliver(client, stale.event("payment_intent.succeeded", {}))
    ).status_code == 401


def _cal(secret: str, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    raw = json.dumps(body).encode()
    mac = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return raw, {"X-Cal-Signature-256": mac, "Content-Type": "application/json"}


def _booking(runtime: Runtime, uid: str, *, minutes_ago: int = 0) -> dict[str, Any]:
    created = runtime.clock.now() - timedelta(minutes=minutes_ago)
    return {
        "triggerEvent": "BOOKING_CREATED",
        "createdAt": created.isoformat().replace("+00:00", "Z"),
        "payload": {
            "uid": uid,
            "type": "intro-call",
            "title": "Intro call between Ada and Sam",
            "startTime": "2026-12-03T10:00:00Z",
            "endTime": "2026-12-03T10:30:00Z",
            "attendees": [{"email": "ada@example.com", "name": "Ada", "timeZone": "Europe/London"}],
            "organizer": {"email": "sam@example.com", "name": "Sam"},
        },
    }


async def test_calcom_source_with_a_generated_secret_shown_once(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    source = await _source(client, tenant, name="Cal", provider="calcom")
    secret = source["secret"]
    assert secret
    assert source["receives"] == "booking"
    listed = (await client.get(API, headers=auth(tenant))).json()
    assert [s["name"] for s in listed] == ["Cal"]
    assert secret not in json.dumps(listed)
    async with runtime.db.read() as s:
        row = await s.scalar(select(WebhookSource))
    assert row is not None
    assert secret.encode() not in row.secret_ciphertext  # encrypted at rest
    assert runtime.secrets.decrypt(row.secret_ciphertext) == secret

    path = _path(source)
    body, headers = _cal(secret, _booking(runtime, "bk-1"))
    got = await client.post(path, content=body, headers=headers)
    assert got.status_code == 202, got.text
    assert got.json()["stored"] is True
    assert (await client.post(path, content=body, headers=headers)).json()["stored"] is False
    now = runtime.clock.now().isoformat()
    ping, ping_headers = _cal(secret, {"triggerEvent": "PING", "createdAt": now, "payload": {}})
    pinged = await client.post(path, content=ping, headers=ping_headers)
    assert (pinged.status_code, pinged.json()["stored"]) == (202, False)
    bad, bad_headers = _cal("not-the-secret-at-all", _booking(runtime, "bk-2"))
    assert (await client.post(path, content=bad, headers=bad_headers)).status_code == 401
    old, old_headers = _cal(secret, _booking(runtime, "bk-3", minutes_ago=6))
    assert (await client.post(path, content=old, headers=old_headers)).status_code == 401
    assert (await client.post(path, content=body, headers={})).status_code == 401
    assert await _stored(runtime) == 1
    await settle(runtime)
    async with runtime.db.read() as s:
        [booked] = list(
            await s.scalars(select(ContactEvent).where(ContactEvent.name == "booking_made"))
        )
        who = await s.get(Contact, booked.contact_id)
    assert who is not None
    assert who.email == "ada@example.com"
    assert booked.properties["resource"] == "intro-call"


async def test_our_signature_source_rotate_and_delete(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    refused = await client.post(
        API,
        json={"name": "Own", "provider": "sweepline", "secret": "x" * 20},
        headers=auth(tenant),
    )
    assert refused.status_code == 422
    wrong = await client.post(
        API, json={"name": "Own", "provider": "stripe", "receives": "booking"}, headers=auth(tenant)
    )
    assert wrong.status_code == 422
    source = await _source(client, tenant, name="Own", provider="sweepline", receives="booking")
    dup = await client.post(API, json={"name": "Own", "provider": "calcom"}, headers=auth(tenant))
    assert dup.status_code == 409
    path, first = _path(source), source["secret"]
    at = int(runtime.clock.now().timestamp())
    booking = {
        "id": "own-1",
        "type": "booking.created",
        "booking": {"id": "b1", "resource_id": "room", "attendee": {"email": "cat@example.com"}},
    }
    body, headers = signed(first, booking, at=at)
    assert (await client.post(path, content=body, headers=headers)).status_code == 202
    rotated = (
        await client.post(f"{API}/{source['id']}/rotate", json={}, headers=auth(tenant))
    ).json()
    assert rotated["secret"]
    assert rotated["secret"] != first
    body, headers = signed(first, {**booking, "id": "own-2"}, at=at)
    assert (await client.post(path, content=body, headers=headers)).status_code == 401
    body, headers = signed(rotated["secret"], {**booking, "id": "own-3"}, at=at)
    assert (await client.post(path, content=body, headers=headers)).status_code == 202
    gone = await client.delete(f"{API}/{source['id']}", headers=auth(tenant))
    assert gone.status_code == 204
    assert (await client.post(path, content=body, headers=headers)).status_code == 404
    assert (await client.delete(f"{API}/{source['id']}", headers=auth(tenant))).status_code == 404
    assert await _stored(runtime) == 2


async def test_the_workspace_signature_endpoints_still_work(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """``/hooks/funnels/{workspace}/payments`` stays signed with the workspace's secret."""
    at = int(runtime.clock.now().timestamp())
    payment = {"id": "evt_9", "type": "payment_intent.succeeded", "data": {"object": {}}}
    body, headers = signed(tenant.webhook_secret, payment, at=at, header="Stripe-Signature")
    url = f"/hooks/funnels/{tenant.workspace_id}/payments"
    assert (await client.post(url, content=body, headers=headers)).status_code == 202
    body, headers = signed("whsec_someone_else", payment, at=at, header="Stripe-Signature")
    assert (await client.post(url, content=body, headers=headers)).status_code == 401
