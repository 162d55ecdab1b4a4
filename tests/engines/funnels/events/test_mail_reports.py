"""Delivery reports of funnel mail attributed by Message-ID (spec §9, FN-13): a bounce, a
complaint or an unsubscribe that names only the Message-ID suppresses the contact and is counted
on the message's node; Amazon SES through SNS (signature verified against the sandbox SNS's
certificate, topic checked, subscription confirmed) and Mailgun (HMAC signing key) in their own
formats, with valid and invalid signatures."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.models import Contact, ContactEvent, DeliveryEvent, OutboxEffect
from app.integrations.mail.sns import SnsVerifier
from app.platform.service import set_secret
from app.sandbox.mailgun_webhooks import MailgunWebhook
from app.sandbox.sns import SNS_CONTENT_TYPE, SnsSandbox, start_sns_sandbox
from tests.engines.funnels.factories import (
    Engine,
    contact,
    email_node,
    graph,
    node,
    published,
    replace_funnels_deps,
    settle,
)
from tests.engines.funnels.outbox.test_unsubscribe import _enrol

TOPIC = "arn:aws:sns:eu-west-1:123456789012:ses-reports"


@pytest.fixture(scope="module")
def sns() -> Iterator[SnsSandbox]:
    sandbox, server = start_sns_sandbox()
    try:
        yield sandbox
    finally:
        server.stop()


@pytest.fixture
def loopback_sns(runtime) -> None:
    """The receiver may fetch from the sandbox SNS (production allows only sns.*.amazonaws.com)."""
    replace_funnels_deps(runtime, sns=SnsVerifier(url_pattern=r"^http://127\.0\.0\.1:\d+/"))


async def _secret(runtime, ws: int, name: str, value: str) -> None:
    async with runtime.db.write() as uow:
        await set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=ws,
            name=name,
            value=value,
            now=runtime.clock.now(),
        )


def _two_mails() -> dict:
    return graph(
        email_node("first", subject="First", body="Hello", next="w"),
        node("wait", "w", days=1, next="second"),
        email_node("second", subject="Second", body="Again"),
        triggers=[{"kind": "manual"}],
    )


async def _first_message(runtime, tenant, engine: Engine, email: str = "ann@example.com"):
    funnel_id, _ = await published(runtime, tenant.workspace_id, _two_mails())
    person = await contact(runtime, tenant.workspace_id, email)
    await _enrol(runtime, funnel_id, person)
    await engine.drive()
    [message] = [m for m in engine.sink.messages if m.to == [email]]
    return person, message


async def _state(runtime, person: int) -> tuple[dict[str, str], set[tuple[str, str]]]:
    async with runtime.db.read() as s:
        found = await s.get(Contact, person)
        assert found is not None
        rows = await s.execute(
            select(OutboxEffect.node_id, DeliveryEvent.kind)
            .join(OutboxEffect, OutboxEffect.id == DeliveryEvent.outbox_id)
            .where(DeliveryEvent.contact_id == person)
        )
        return dict(found.suppressed or {}), {(r[0], r[1]) for r in rows}


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("bounced", "bounced"), ("complained", "complained"), ("unsubscribed", "unsubscribed")],
)
async def test_a_report_naming_only_the_message_id_suppresses_and_counts_on_the_node(
    client, runtime, tenant, engine: Engine, kind: str, reason: str
) -> None:
    person, message = await _first_message(runtime, tenant, engine)
    assert message.message_id.startswith("<run-")
    got = await client.post(
        "/hooks/funnels/delivery",
        json={"event_id": f"r-{kind}", "kind": kind, "message_id": message.message_id},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert got.status_code == 202
    await settle(runtime)
    suppressed, counted = await _state(runtime, person)
    assert suppressed == {"email": reason}
    assert (("first", kind)) in counted
    # The next message of the funnel is not sent.
    await engine.advance(days=1, minutes=1)
    assert [m.subject for m in engine.sink.messages] == ["First"]
    async with runtime.db.read() as s:
        [event] = await s.scalars(select(ContactEvent).where(ContactEvent.name == f"email_{kind}"))
        assert event.contact_id == person
        [inbound] = await s.scalars(select(InboundEvent))
        assert inbound.outcome == "recorded"


async def test_fn31_an_unsubscribe_reported_after_a_bounce_leaves_the_bounce(
    client, runtime, tenant, engine: Engine
) -> None:
    """FN-31: a bounce stops transactional mail too, an unsubscribe only marketing mail; a later,
    weaker report must not lift the stronger suppression."""
    person, message = await _first_message(runtime, tenant, engine)
    for n, kind in enumerate(("bounced", "unsubscribed")):
        got = await client.post(
            "/hooks/funnels/delivery",
            json={"event_id": f"r-{n}", "kind": kind, "message_id": message.message_id},
            headers={"X-Ingest-Token": tenant.ingest_token},
        )
        assert got.status_code == 202
        await settle(runtime)
    assert (await _state(runtime, person))[0] == {"email": "bounced"}


async def test_a_report_for_another_workspaces_message_is_dropped(
    client, runtime, tenant, other_tenant, engine: Engine
) -> None:
    person, message = await _first_message(runtime, tenant, engine)
    got = await client.post(
        "/hooks/funnels/delivery",
        json={"event_id": "x", "kind": "bounced", "message_id": message.message_id},
        headers={"X-Ingest-Token": other_tenant.ingest_token},
    )
    assert got.status_code == 202
    await settle(runtime)
    assert (await _state(runtime, person))[0] == {}
    async with runtime.db.read() as s:
        [inbound] = await s.scalars(select(InboundEvent))
        assert inbound.outcome == "dropped: the message was sent by another workspace"


def _ses_bounce(message, *, bounce_type: str = "Permanent", rewrite_id: bool = True) -> dict:
    """An SES bounce notification as SES sends it: SES's own id in ``mail.messageId`` and, when it
    rewrote the header, in ``commonHeaders.messageId``; the original headers when
    headersInNotificationsEnabled is on."""
    ses_id = "0102018f-ses-id-000000"
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": message.to[0], "status": "5.1.1"}],
            "timestamp": "2026-12-01T10:00:00.000Z",
            "feedbackId": "0102-feedback",
        },
        "mail": {
            "timestamp": "2026-12-01T09:59:58.000Z",
            "messageId": ses_id,
            "source": "funnels@test.example",
            "destination": message.to,
            "headersTruncated": False,
            "headers": [
                {
                    "name": "X-Sweepline-Message-Id",
                    "value": message.headers["X-Sweepline-Message-Id"],
                },
                {"name": "Subject", "value": message.subject},
            ],
            "commonHeaders": {
                "messageId": f"<{ses_id}@email.amazonses.com>"
                if rewrite_id
                else message.message_id,
                "subject": message.subject,
            },
        },
    }


async def test_ses_through_sns_valid_and_invalid_signatures(
    client, runtime, tenant, engine: Engine, sns: SnsSandbox, loopback_sns
) -> None:
    ws = tenant.workspace_id
    url = f"/hooks/funnels/{ws}/ses"
    headers = {"Content-Type": SNS_CONTENT_TYPE}
    person, message = await _first_message(runtime, tenant, engine)

    # Not configured: refused, nothing stored.
    body = sns.notification(TOPIC, _ses_bounce(message))
    assert (await client.post(url, content=body, headers=headers)).status_code == 401
    await _secret(runtime, ws, "funnels.ses.topic_arns", f"arn:aws:sns:x:1:other, {TOPIC}")

    # The subscription is confirmed by visiting SubscribeURL (at the sandbox SNS).
    confirm = await client.post(url, content=sns.subscription_confirmation(TOPIC), headers=headers)
    assert confirm.status_code == 200, confirm.text
    assert confirm.json()["confirmed"] is True
    assert len(sns.confirmed) == 1

    # Forged signature, another topic, a tampered body: 401 and nothing stored.
    forged = sns.notification(TOPIC, _ses_bounce(message), forged=True)
    assert (await client.post(url, content=forged, headers=headers)).status_code == 401
    foreign = sns.notification("arn:aws:sns:eu-west-1:999:theirs", _ses_bounce(message))
    assert (await client.post(url, content=foreign, headers=headers)).status_code == 401
    tampered = json.loads(sns.notification(TOPIC, _ses_bounce(message), version="2"))
    tampered["Message"] = tampered["Message"].replace("Permanent", "Permanent ")
    assert (
        await client.post(url, content=json.dumps(tampered).encode(), headers=headers)
    ).status_code == 401
    # A transient bounce is no report (the provider keeps retrying).
    soft = sns.notification(TOPIC, _ses_bounce(message, bounce_type="Transient"))
    assert (await client.post(url, content=soft, headers=headers)).json()["reports"] == 0
    async with runtime.db.read() as s:
        assert list(await s.scalars(select(InboundEvent))) == []

    # Valid (SignatureVersion 2, with a Subject in the signed string): attributed by our header
    # although SES rewrote Message-ID; a retried notification stores nothing new.
    good = sns.notification(TOPIC, _ses_bounce(message), version="2", subject="Amazon SES")
    first = await client.post(url, content=good, headers=headers)
    assert first.status_code == 200, first.text
    assert first.json() == {"reports": 1, "stored": 1, "confirmed": False}
    again = await client.post(url, content=good, headers=headers)
    assert again.json()["stored"] == 0
    await settle(runtime)
    suppressed, counted = await _state(runtime, person)
    assert suppressed == {"email": "bounced"}
    assert ("first", "bounced") in counted


async def test_mailgun_webhooks_valid_and_invalid_signatures(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    mailgun = MailgunWebhook(url=f"/hooks/funnels/{ws}/mailgun", clock=runtime.clock)
    person, message = await _first_message(runtime, tenant, engine)
    # Mailgun gives the Message-ID without angle brackets.
    complaint = mailgun.event("complained", message.to[0], message.message_id, id="mg-event-1")
    assert (await mailgun.deliver(client, mailgun.signed(complaint))).status_code == 401
    await _secret(runtime, ws, "funnels.mailgun.signing_key", mailgun.signing_key)
    wrong = mailgun.signed(complaint, key="key-2")
    assert (await mailgun.deliver(client, wrong)).status_code == 401
    unsigned = {"event-data": complaint}
    assert (await mailgun.deliver(client, unsigned)).status_code == 401
    temporary = {**complaint, "id": "mg-2", "event": "failed", "severity": "temporary"}
    assert (await mailgun.deliver(client, mailgun.signed(temporary))).json()["reports"] == 0
    async with runtime.db.read() as s:
        assert list(await s.scalars(select(InboundEvent))) == []

    got = await mailgun.deliver(client, mailgun.signed(complaint))
    assert got.status_code == 200, got.text
    assert got.json()["stored"] == 1
    opened = {**complaint, "id": "mg-3", "event": "opened"}
    assert (await mailgun.deliver(client, mailgun.signed(opened))).json()["stored"] == 1
    await settle(runtime)
    suppressed, counted = await _state(runtime, person)
    assert suppressed == {"email": "complained"}
    assert {("first", "complained"), ("first", "opened")} <= counted
