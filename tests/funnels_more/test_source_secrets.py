"""Payment and booking sources verify the provider's own signature with a per-source secret
(spec FN-13): a Stripe endpoint's ``whsec_…`` secret signs ``Stripe-Signature``; once it is
configured, our own workspace signature no longer authenticates that source."""

from __future__ import annotations

from sqlalchemy import func, select

from app.engines.funnels.events import InboundEvent
from app.platform.service import set_secret
from tests.funnels_more.conftest import signed

WHSEC = "whsec_5f1e2d3c4b5a69788796a5b4c3d2e1f0"


def _payment(event_id: str) -> dict:
    return {
        "id": event_id,
        "object": "event",
        "type": "payment_intent.succeeded",
        "data": {
            "object": {
                "id": "pi_1",
                "amount_received": 4200,
                "currency": "eur",
                "receipt_email": "payer@example.com",
            }
        },
    }


async def _stored(runtime) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(InboundEvent)) or 0)


async def test_stripe_signature_with_the_endpoints_whsec_secret(client, runtime, tenant) -> None:
    ws = tenant.workspace_id
    url = f"/hooks/funnels/{ws}/payments"
    at = int(runtime.clock.now().timestamp())
    async with runtime.db.write() as uow:
        await set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=ws,
            name="funnels.payments.webhook_secret",
            value=WHSEC,
            now=runtime.clock.now(),
        )
    body, headers = signed(WHSEC, _payment("evt_1"), at=at, header="Stripe-Signature")
    got = await client.post(url, content=body, headers=headers)
    assert got.status_code == 202, got.text
    assert got.json()["stored"] is True
    # Our own signature does not stand in for the source's secret once it is configured.
    body, headers = signed(tenant.webhook_secret, _payment("evt_2"), at=at)
    assert (await client.post(url, content=body, headers=headers)).status_code == 401
    body, headers = signed("whsec_wrong", _payment("evt_3"), at=at, header="Stripe-Signature")
    assert (await client.post(url, content=body, headers=headers)).status_code == 401
    stale = at - 3600
    body, headers = signed(WHSEC, _payment("evt_4"), at=stale, header="Stripe-Signature")
    assert (await client.post(url, content=body, headers=headers)).status_code == 401
    assert await _stored(runtime) == 1


async def test_without_a_source_secret_our_signature_still_works(client, runtime, tenant) -> None:
    ws = tenant.workspace_id
    at = int(runtime.clock.now().timestamp())
    body, headers = signed(
        tenant.webhook_secret, _payment("evt_9"), at=at, header="Stripe-Signature"
    )
    got = await client.post(f"/hooks/funnels/{ws}/payments", content=body, headers=headers)
    assert got.status_code == 202, got.text
