"""One person seeded through every path that stores data about a contact, over the real HTTP
endpoints where the path is HTTP: events before the contact exists, the API (with an
``Idempotency-Key``, so its answer is stored), a CSV import, a hosted form, the site snippet, a
funnel that mails them and sets a field, a test send, a campaign, delivery reports (generic,
Amazon SES through SNS, Mailgun, SendGrid and Postmark, these about a Message-ID we never sent), a one-click
unsubscribe, a Stripe payment and a booking."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx

from app.engines.funnels.campaigns.work.sender import send_until_done
from app.engines.funnels.events.tracking import Tracking
from app.integrations.mail import MailSender
from app.integrations.mail.sns import SnsVerifier
from app.sandbox.mailgun_webhooks import MailgunWebhook
from app.sandbox.postmark_webhooks import PostmarkWebhook
from app.sandbox.sendgrid_webhooks import SendGridEventWebhook
from app.sandbox.sns import SNS_CONTENT_TYPE
from app.settings import MailSettings
from tests.conftest import auth
from tests.engines.funnels.campaigns.test_campaigns import _campaign, _sender
from tests.engines.funnels.contacts.test_contact_import import _run
from tests.engines.funnels.events.test_mail_reports import TOPIC, _secret
from tests.engines.funnels.factories import (
    Engine,
    graph,
    node,
    published,
    replace_funnels_deps,
    settle,
    setup_names,
    signed,
)
from tests.factories import Tenant

EMAIL = "zelda.quux@example.com"
PHONE = "+1 555 0199"
NEEDLES = ("zelda", "quux", "555 0199", "5550199", "plumbus")
"""The address, the names, the phone and a property's value (lower case)."""
UNKNOWN_MESSAGE = "<never-sent-by-us-42@mail.elsewhere.example>"


@dataclass
class Seeded:
    contact_id: int
    funnel_id: int


async def _event_before_the_contact(client: httpx.AsyncClient, tenant: Tenant) -> None:
    early = await client.post(
        "/hooks/funnels/events",
        json={
            "event_id": "early-1",
            "name": "browsed",
            "contact": {
                "email": EMAIL,
                "first_name": "Zelda",
                "last_name": "Quux",
                "phone": PHONE,
            },
            "properties": {"wish": "a plumbus deluxe"},
        },
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert early.status_code == 202, early.text


async def _api_and_import(client: httpx.AsyncClient, runtime, tenant: Tenant) -> int:
    created = await client.post(
        "/api/v1/funnels/contacts",
        json={
            "email": EMAIL,
            "first_name": "Zelda",
            "last_name": "Quux",
            "phone": PHONE,
            "fields": {"code": "plumbus-42"},
            "tags": ["vip"],
            "lists": ["news"],
        },
        headers={**auth(tenant), "Idempotency-Key": "create-zelda"},
    )
    assert created.status_code == 201, created.text
    csv = (
        "email,first_name,last_name,code,timezone\n"
        f"{EMAIL},Zelda,Quux,plumbus-43,UTC\n"
        f"{EMAIL.upper()},Zelda,Quux,plumbus-44,Plumbus/Zelda\n"
    )
    job = await client.post(
        "/api/v1/funnels/contacts/import", json={"csv": csv}, headers=auth(tenant)
    )
    assert job.status_code == 202, job.text
    await _run(runtime, job.json()["id"])
    return int(created.json()["id"])


async def _form_and_site(client: httpx.AsyncClient, tenant: Tenant, zelda: int) -> None:
    form = await client.post(
        "/api/v1/funnels/forms",
        json={"name": "Signup", "fields": [{"key": "first_name", "label": "Name"}]},
        headers=auth(tenant),
    )
    assert form.status_code == 201, form.text
    submitted = await client.post(
        f"/t/f/{form.json()['public_id']}",
        data={"email": EMAIL, "first_name": "Zelda", "submission_id": "f-1"},
    )
    assert submitted.status_code == 200
    site = (await client.get("/api/v1/funnels/site", headers=auth(tenant))).json()
    visitor = (
        await client.get(f"/api/v1/funnels/contacts/{zelda}/visitor-token", headers=auth(tenant))
    ).json()
    visit = {
        "key": site["site_key"],
        "visitor": visitor["token"],
        "id": "v1",
        "url": "https://shop.example/plumbus?ref=zelda",
        "title": "Plumbus for Zelda",
    }
    assert (await client.post("/t/c", json=visit)).status_code == 204


async def _funnel(runtime, tenant: Tenant) -> int:
    funnel_id, _ = await published(
        runtime,
        tenant.workspace_id,
        graph(
            node(
                "send_email",
                "hello",
                subject="Hi {{first_name}} {{last_name}}",
                body="Your code {{code}}: https://shop.example/?who={{email}}",
                next="set",
            ),
            node("set_field", "set", field="code", value="grumbo-7", next="w"),
            node("wait", "w", days=3),
            triggers=[{"kind": "api_event", "event": "signup"}],
        ),
    )
    return funnel_id


async def _mail_and_test_send(client, runtime, tenant, engine: Engine, sink, funnel_id, zelda):
    event = await client.post(
        "/hooks/funnels/events",
        json={
            "event_id": "zq-1",
            "name": "signup",
            "contact": {"email": EMAIL},
            "properties": {"note": "Zelda from Quux, plumbus fan", "phone": PHONE},
        },
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert event.status_code == 202
    await settle(runtime)
    await engine.drive()
    trial = await client.post(
        f"/api/v1/funnels/{funnel_id}/test-send",
        json={"node_id": "hello", "to": "colleague@acme.test", "contact_id": zelda},
        headers=auth(tenant),
    )
    assert trial.status_code == 200, trial.text
    [message] = [m for m in sink.messages if m.to == [EMAIL]]
    return message


async def _campaign_sent(client, runtime, tenant: Tenant, sink) -> None:
    campaign = await _campaign(client, tenant)
    await client.post(f"/api/v1/funnels/campaigns/{campaign['id']}/audience", headers=auth(tenant))
    sender, pool = _sender(runtime, sink, signing=Tracking("http://x.test", "s"))
    try:
        assert await send_until_done(sender, campaign["id"], runtime.clock)
    finally:
        await pool.aclose()
    [news] = [m for m in sink.messages if m.to == [EMAIL] and m.subject == "News for Zelda"]
    opened = await client.post(
        "/hooks/funnels/delivery",
        json={"event_id": "c-1", "kind": "opened", "message_id": news.message_id, "email": EMAIL},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert opened.status_code == 202


async def _reports_about_an_unknown_message(client, runtime, tenant: Tenant, sns) -> None:
    """Amazon SES (through SNS) and Mailgun reports naming the address, about a Message-ID we
    never sent, before the address is a contact's: stored, dropped, never linked."""
    ws = tenant.workspace_id
    await _secret(runtime, ws, "funnels.ses.topic_arns", TOPIC)
    delivery = {
        "notificationType": "Delivery",
        "mail": {
            "timestamp": "2026-03-02T09:00:00.000Z",
            "messageId": "0102-unknown-ses-id",
            "source": "someone@elsewhere.example",
            "destination": [EMAIL],
            "commonHeaders": {"messageId": UNKNOWN_MESSAGE, "subject": "Plumbus for Zelda"},
        },
    }
    ses = await client.post(
        f"/hooks/funnels/{ws}/ses",
        content=sns.notification(TOPIC, delivery),
        headers={"Content-Type": SNS_CONTENT_TYPE},
    )
    assert ses.status_code == 200, ses.text
    assert ses.json()["stored"] == 1
    mailgun = MailgunWebhook(url=f"/hooks/funnels/{ws}/mailgun", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.mailgun.signing_key", mailgun.signing_key)
    opened = mailgun.event("opened", EMAIL, UNKNOWN_MESSAGE, id="mg-unknown-1")
    got = await mailgun.deliver(client, mailgun.signed(opened))
    assert got.status_code == 200, got.text
    assert got.json()["stored"] == 1
    sendgrid = SendGridEventWebhook(url=f"/hooks/funnels/{ws}/sendgrid", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.sendgrid.verification_key", sendgrid.verification_key)
    got = await sendgrid.deliver(client, [sendgrid.event("delivered", EMAIL, UNKNOWN_MESSAGE)])
    assert got.status_code == 200, got.text
    postmark = PostmarkWebhook(url=f"/hooks/funnels/{ws}/postmark", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.postmark.basic_auth", postmark.basic_auth)
    got = await postmark.deliver(client, postmark.delivery(EMAIL))
    assert got.status_code == 200, got.text


async def _report_and_unsubscribe(client, runtime, tenant: Tenant, message) -> None:
    known = await client.post(
        "/hooks/funnels/delivery",
        json={"event_id": "d-1", "kind": "delivered", "message_id": message.message_id},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert known.status_code == 202
    # RFC 8058 one-click unsubscribe from the funnel mail (the contact's choice is stored).
    [one_click] = re.findall(r"<(https?://[^>]+)>", message.headers["List-Unsubscribe"])
    left = await client.post(
        one_click.removeprefix(runtime.settings.web.public_url),
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert left.status_code == 200


async def _payment_and_booking(client, runtime, tenant: Tenant) -> None:
    ws = tenant.workspace_id
    now = int(runtime.clock.now().timestamp())
    payment = {
        "id": "evt_zq",
        "type": "payment_intent.succeeded",
        "data": {
            "object": {
                "id": "pi_zq",
                "amount": 2500,
                "currency": "eur",
                "receipt_email": EMAIL,
                "shipping": {"name": "Zelda Quux", "phone": PHONE},
                "description": "one plumbus",
            }
        },
    }
    body, headers = signed(tenant.webhook_secret, payment, at=now, header="Stripe-Signature")
    paid = await client.post(f"/hooks/funnels/{ws}/payments", content=body, headers=headers)
    assert paid.status_code == 202, paid.text
    booking = {
        "id": "bk-zq",
        "type": "booking.created",
        "booking": {
            "id": "b-zq",
            "resource_id": "plumbus-room",
            "start": "2026-03-04T10:00:00Z",
            "attendee": {"email": EMAIL, "name": "Zelda Quux", "phone": PHONE},
        },
    }
    body, headers = signed(tenant.webhook_secret, booking, at=now)
    booked = await client.post(f"/hooks/funnels/{ws}/bookings", content=body, headers=headers)
    assert booked.status_code == 202, booked.text


async def seed_every_path(client, runtime, tenant: Tenant, engine: Engine, sink, sns) -> Seeded:
    """Store the person everywhere; the campaign is sent before the unsubscribe."""
    await setup_names(
        runtime, tenant.workspace_id, tags=["vip"], lists=["news"], fields={"code": "text"}
    )
    mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="f@test.example")
    # Test sends reach the sink; SNS certificates may come from the loopback sandbox.
    replace_funnels_deps(
        runtime,
        trial_mail=MailSender(mail),
        sns=SnsVerifier(url_pattern=r"^http://127\.0\.0\.1:\d+/"),
    )
    await _event_before_the_contact(client, tenant)
    await _reports_about_an_unknown_message(client, runtime, tenant, sns)
    await settle(runtime)
    zelda = await _api_and_import(client, runtime, tenant)
    funnel_id = await _funnel(runtime, tenant)
    await _form_and_site(client, tenant, zelda)
    message = await _mail_and_test_send(client, runtime, tenant, engine, sink, funnel_id, zelda)
    await _campaign_sent(client, runtime, tenant, sink)
    await _report_and_unsubscribe(client, runtime, tenant, message)
    await _payment_and_booking(client, runtime, tenant)
    await settle(runtime)
    await engine.drive()
    return Seeded(zelda, funnel_id)
