"""FN-13a: delivery reports in SendGrid's and Postmark's native webhook formats, and Mailgun's
replay protection, over real HTTP through the app, posted by the providers' simulators.

SendGrid's signed Event Webhook (ECDSA over timestamp + body with the workspace's verification
key), Postmark's webhook credentials (basic auth, a secret header), Mailgun's stale timestamp and
reused token: each failing request is a 401 and stores nothing; a retried report is stored once;
only permanent bounces count; complaints suppress the address; reports are attributed to the
message node by its Message-ID (Postmark: by the id in the message's metadata) and one naming an
unknown message is stored and applied to the contact by address only."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
from sqlalchemy import func, select

from app.engines.funnels.events.models import InboundEvent, ReportNonce
from app.engines.funnels.models import Contact, ContactEvent, DeliveryEvent
from app.sandbox.mailgun_webhooks import MailgunWebhook
from app.sandbox.postmark_webhooks import PostmarkWebhook
from app.sandbox.sendgrid_webhooks import SendGridEventWebhook
from tests.engines.funnels.events.test_mail_reports import _first_message, _secret, _state
from tests.engines.funnels.factories import Engine, contact, settle
from tests.harness.app_client import asgi_transport


async def _stored(runtime) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(InboundEvent)) or 0)


async def _reports(runtime, person: int) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The contact's suppression and the reports counted on message nodes (beside ``sent``)."""
    suppressed, counted = await _state(runtime, person)
    return suppressed, {c for c in counted if c[1] != "sent"}


def _sendgrid(runtime, ws: int) -> SendGridEventWebhook:
    return SendGridEventWebhook(url=f"/hooks/funnels/{ws}/sendgrid", clock=runtime.clock)


# -- SendGrid ------------------------------------------------------------------------------


async def test_fn13a_sendgrid_signed_batch_one_report_per_event_attributed_and_idempotent(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    sendgrid = _sendgrid(runtime, ws)
    person, message = await _first_message(runtime, tenant, engine)
    await _secret(runtime, ws, "funnels.sendgrid.verification_key", sendgrid.verification_key)
    to, mid = message.to[0], message.message_id
    batch = [
        sendgrid.event("processed", to, mid),
        sendgrid.event("delivered", to, mid),
        sendgrid.event("open", to, mid),
        sendgrid.event("click", to, mid, url="https://example.com/offer"),
        sendgrid.event("bounce", to, mid),
    ]
    got = await sendgrid.deliver(client, batch)
    assert got.status_code == 200, got.text
    assert got.json() == {"reports": 4, "stored": 4, "confirmed": False}
    # SendGrid retries the whole batch: nothing new is stored.
    again = await sendgrid.deliver(client, batch)
    assert again.status_code == 200
    assert again.json()["stored"] == 0
    assert await _stored(runtime) == 4
    await settle(runtime)
    suppressed, counted = await _reports(runtime, person)
    assert suppressed == {"email": "bounced"}
    assert counted == {
        ("first", "delivered"),
        ("first", "opened"),
        ("first", "clicked"),
        ("first", "bounced"),
    }
    async with runtime.db.read() as s:
        [click] = await s.scalars(select(ContactEvent).where(ContactEvent.name == "link_clicked"))
    assert click.properties["url"] == "https://example.com/offer"


async def test_fn13a_sendgrid_bad_signature_stale_timestamp_or_no_key_is_401_nothing_stored(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    sendgrid = _sendgrid(runtime, ws)
    _, message = await _first_message(runtime, tenant, engine)
    batch = [sendgrid.event("bounce", message.to[0], message.message_id)]
    # No verification key configured.
    assert (await sendgrid.deliver(client, batch)).status_code == 401
    await _secret(runtime, ws, "funnels.sendgrid.verification_key", sendgrid.verification_key)
    # Signed by a key SendGrid never showed us.
    body, headers = sendgrid.signed(batch, forged=True)
    assert (await client.post(sendgrid.url, content=body, headers=headers)).status_code == 401
    # A signed body changed on the way (a bounce turned into another event).
    body, headers = sendgrid.signed(batch)
    tampered = body.replace(b'"bounce"', b'"spamreport"', 1)
    assert (await client.post(sendgrid.url, content=tampered, headers=headers)).status_code == 401
    # The signature without its headers.
    assert (await client.post(sendgrid.url, content=body)).status_code == 401
    # A captured request replayed sixteen minutes later.
    runtime.clock.advance(minutes=16)
    stale = await client.post(sendgrid.url, content=body, headers=headers)
    assert stale.status_code == 401
    assert "15 minutes" in stale.json()["message"]
    assert await _stored(runtime) == 0


async def test_fn13a_sendgrid_only_permanent_bounces_count_and_a_spam_report_suppresses(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    sendgrid = _sendgrid(runtime, ws)
    person, message = await _first_message(runtime, tenant, engine)
    await _secret(runtime, ws, "funnels.sendgrid.verification_key", sendgrid.verification_key)
    to, mid = message.to[0], message.message_id
    # A block (the receiving server refused for now), a deferral and a drop for a reason that
    # says nothing about the address: no report.
    soft = [
        sendgrid.event("bounce", to, mid, type="blocked", status="4.0.0"),
        sendgrid.event("deferred", to, mid),
        sendgrid.event("dropped", to, mid, reason="Invalid SMTPAPI header"),
    ]
    got = await sendgrid.deliver(client, soft)
    assert got.json() == {"reports": 0, "stored": 0, "confirmed": False}
    await settle(runtime)
    assert await _reports(runtime, person) == ({}, set())
    # A spam report: the address is suppressed as complained.
    got = await sendgrid.deliver(client, [sendgrid.event("spamreport", to, mid)])
    assert got.json()["stored"] == 1
    await settle(runtime)
    suppressed, counted = await _reports(runtime, person)
    assert suppressed == {"email": "complained"}
    assert counted == {("first", "complained")}


async def test_fn13a_sendgrid_unknown_message_id_is_stored_unattributed(
    client, runtime, tenant, engine: Engine
) -> None:
    """A report about a message we did not send (or whose id was rewritten) is kept and applied
    to the contact of its address, counted on no message node; with no such contact it is kept
    with the reason it was dropped."""
    ws = tenant.workspace_id
    sendgrid = _sendgrid(runtime, ws)
    await _secret(runtime, ws, "funnels.sendgrid.verification_key", sendgrid.verification_key)
    known = await contact(runtime, ws, "known@example.com")
    batch = [
        sendgrid.event("unsubscribe", "known@example.com", "<abc.123@elsewhere.example>"),
        sendgrid.event("spamreport", "stranger@example.com", "<def.456@elsewhere.example>"),
    ]
    got = await sendgrid.deliver(client, batch)
    assert got.json()["stored"] == 2
    await settle(runtime)
    async with runtime.db.read() as s:
        found = await s.get(Contact, known)
        assert found is not None
        assert found.suppressed == {"email": "unsubscribed"}
        assert await s.scalar(select(func.count()).select_from(DeliveryEvent)) == 0
        outcomes = {
            e.payload["email"]: e.outcome
            for e in await s.scalars(select(InboundEvent).order_by(InboundEvent.id))
        }
    assert outcomes == {
        "known@example.com": "recorded",
        "stranger@example.com": "dropped: no contact with e-mail stranger@example.com",
    }


# -- Postmark ------------------------------------------------------------------------------


async def test_fn13a_postmark_credentials_checked_else_401_nothing_stored(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    postmark = PostmarkWebhook(url=f"/hooks/funnels/{ws}/postmark", clock=runtime.clock)
    _, message = await _first_message(runtime, tenant, engine)
    record = postmark.bounce(message.to[0])
    # Nothing configured: refused.
    assert (await postmark.deliver(client, record)).status_code == 401
    await _secret(runtime, ws, "funnels.postmark.basic_auth", postmark.basic_auth)
    body, headers = postmark.request(record, credentials=False)
    assert (await client.post(postmark.url, content=body, headers=headers)).status_code == 401
    wrong = PostmarkWebhook(url=postmark.url, password="not-the-password")
    assert (await wrong.deliver(client, record)).status_code == 401
    # With a secret header configured as well, both must match.
    await _secret(runtime, ws, "funnels.postmark.header", "X-Webhook-Token: s3cret-value")
    assert (await postmark.deliver(client, record)).status_code == 401
    postmark.header = ("X-Webhook-Token", "s3cret-valuX")
    assert (await postmark.deliver(client, record)).status_code == 401
    assert await _stored(runtime) == 0
    postmark.header = ("X-Webhook-Token", "s3cret-value")
    got = await postmark.deliver(client, record)
    assert got.status_code == 200, got.text
    assert got.json()["stored"] == 1


async def test_fn13a_postmark_hard_bounce_by_metadata_soft_bounce_ignored_duplicate_once(
    client, runtime, tenant, engine: Engine
) -> None:
    """Postmark's ``MessageID`` is its own; the message's metadata (from the
    ``X-PM-Metadata-*`` header every message carries) names our message."""
    ws = tenant.workspace_id
    postmark = PostmarkWebhook(url=f"/hooks/funnels/{ws}/postmark", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.postmark.basic_auth", postmark.basic_auth)
    person, message = await _first_message(runtime, tenant, engine)
    metadata = postmark.metadata_of(message.raw)
    assert metadata == {"sweepline_msgid": message.message_id.strip("<>").partition("@")[0]}
    to = message.to[0]
    soft = await postmark.deliver(
        client, postmark.bounce(to, type_="SoftBounce", metadata=metadata)
    )
    transient = postmark.bounce(to, type_="Transient", metadata=metadata)
    assert soft.json()["reports"] == 0
    assert (await postmark.deliver(client, transient)).json()["reports"] == 0
    kept = postmark.subscription_change(to, suppress=False, metadata=metadata)
    assert (await postmark.deliver(client, kept)).json()["reports"] == 0
    await settle(runtime)
    assert await _reports(runtime, person) == ({}, set())

    hard = postmark.bounce(to, type_="HardBounce", metadata=metadata)
    assert (await postmark.deliver(client, hard)).json()["stored"] == 1
    assert (await postmark.deliver(client, hard)).json()["stored"] == 0  # Postmark retried
    delivered = postmark.delivery(to, metadata=metadata)
    assert (await postmark.deliver(client, delivered)).json()["stored"] == 1
    await settle(runtime)
    suppressed, counted = await _reports(runtime, person)
    assert suppressed == {"email": "bounced"}
    assert counted == {("first", "bounced"), ("first", "delivered")}
    assert await _stored(runtime) == 2


async def test_fn13a_postmark_spam_complaint_suppresses_and_without_metadata_by_address(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    postmark = PostmarkWebhook(url=f"/hooks/funnels/{ws}/postmark", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.postmark.header", "X-Postmark-Secret: abc123")
    postmark.header = ("X-Postmark-Secret", "abc123")
    person, message = await _first_message(runtime, tenant, engine)
    # Without metadata (mail sent through Postmark by another system): the address only.
    got = await postmark.deliver(client, postmark.spam_complaint(message.to[0]))
    assert got.status_code == 200, got.text
    assert got.json()["stored"] == 1
    await settle(runtime)
    suppressed, counted = await _reports(runtime, person)
    assert suppressed == {"email": "complained"}
    assert counted == set()
    async with runtime.db.read() as s:
        [event] = await s.scalars(
            select(ContactEvent).where(ContactEvent.name == "email_complained")
        )
    assert event.contact_id == person


# -- Mailgun replay protection -------------------------------------------------------------


async def test_fn13a_mailgun_stale_timestamp_and_reused_token_are_401_nothing_stored(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    mailgun = MailgunWebhook(url=f"/hooks/funnels/{ws}/mailgun", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.mailgun.signing_key", mailgun.signing_key)
    person, message = await _first_message(runtime, tenant, engine)
    to, mid = message.to[0], message.message_id
    now = int(runtime.clock.now().timestamp())
    # Correctly signed 16 minutes ago (or 16 minutes ahead): refused.
    old = mailgun.signed(mailgun.event("failed", to, mid), at=now - 16 * 60)
    assert (await mailgun.deliver(client, old)).status_code == 401
    ahead = mailgun.signed(mailgun.event("failed", to, mid), at=now + 16 * 60)
    assert (await mailgun.deliver(client, ahead)).status_code == 401
    # Fourteen minutes is within the tolerance.
    opened = mailgun.signed(mailgun.event("opened", to, mid), at=now - 14 * 60, token="t-1")
    assert (await mailgun.deliver(client, opened)).json()["stored"] == 1
    # The signature covers only timestamp and token: a captured one replayed with another
    # event is refused, as is the same request again.
    forged = {**opened, "event-data": mailgun.event("failed", to, mid)}
    replay = await mailgun.deliver(client, forged)
    assert replay.status_code == 401
    assert "used before" in replay.json()["message"]
    assert (await mailgun.deliver(client, opened)).status_code == 401
    assert await _stored(runtime) == 1
    await settle(runtime)
    suppressed, counted = await _reports(runtime, person)
    assert suppressed == {}
    assert counted == {("first", "opened")}


async def test_fn13a_mailgun_token_claimed_once_under_concurrency_and_forgotten_after_expiry(
    client, runtime, tenant
) -> None:
    """Eight concurrent requests carrying one token: exactly one is taken. A token is kept only
    while its timestamp could still be accepted."""
    ws = tenant.workspace_id
    mailgun = MailgunWebhook(url=f"/hooks/funnels/{ws}/mailgun", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.mailgun.signing_key", mailgun.signing_key)
    await contact(runtime, ws, "ann@example.com")
    bodies = [
        mailgun.signed(
            mailgun.event("unsubscribed", "ann@example.com", f"<m{i}@x>", id=f"ev-{i}"),
            token="same-token",
        )
        for i in range(8)
    ]
    answers = await asyncio.gather(*(mailgun.deliver(client, b) for b in bodies))
    assert sorted(a.status_code for a in answers) == [200] + [401] * 7
    assert await _stored(runtime) == 1
    async with runtime.db.read() as s:
        [nonce] = await s.scalars(select(ReportNonce))
    assert nonce.nonce == "same-token"
    assert nonce.expires_at > runtime.clock.now() + timedelta(minutes=14)
    runtime.clock.advance(minutes=16)
    fresh = mailgun.signed(mailgun.event("opened", "ann@example.com", "<m@x>"), token="new")
    assert (await mailgun.deliver(client, fresh)).status_code == 200
    async with runtime.db.read() as s:
        assert [n.nonce for n in await s.scalars(select(ReportNonce))] == ["new"]


async def test_fn13a_postmark_a_header_secret_without_a_value_lets_nothing_in(
    client, runtime, tenant
) -> None:
    """A misconfigured header secret (no value) must not match a request without the header."""
    ws = tenant.workspace_id
    postmark = PostmarkWebhook(url=f"/hooks/funnels/{ws}/postmark", clock=runtime.clock)
    await contact(runtime, ws, "ann@example.com")
    await _secret(runtime, ws, "funnels.postmark.header", "X-Webhook-Token")
    body, headers = postmark.request(postmark.spam_complaint("ann@example.com"))
    assert (await client.post(postmark.url, content=body, headers=headers)).status_code == 401
    assert await _stored(runtime) == 0


async def test_fn13a_mailgun_token_refused_by_another_process_sharing_only_the_database(
    client, settings, runtime, tenant
) -> None:
    """Two app instances, each assembled on its own (own connection pools, caches and event
    writer), as two server processes are: a token one of them took is refused by the other, and
    concurrent posts of one token split over both store once."""
    from app.web.app import create_app
    from app.wiring import assemble
    from tests.conftest import with_own_queue

    ws = tenant.workspace_id
    mailgun = MailgunWebhook(url=f"/hooks/funnels/{ws}/mailgun", clock=runtime.clock)
    await _secret(runtime, ws, "funnels.mailgun.signing_key", mailgun.signing_key)
    await contact(runtime, ws, "ann@example.com")
    other = assemble(with_own_queue(settings), runtime.clock)
    try:
        app = create_app(settings, other, background=False)
        transport = asgi_transport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://other") as second:
            first = mailgun.signed(mailgun.event("opened", "ann@example.com", "<a@x>"), token="t")
            assert (await mailgun.deliver(client, first)).status_code == 200
            again = mailgun.signed(mailgun.event("clicked", "ann@example.com", "<a@x>"), token="t")
            assert (await mailgun.deliver(second, again)).status_code == 401
            bodies = [
                mailgun.signed(
                    mailgun.event("opened", "ann@example.com", f"<m{i}@x>", id=f"e{i}"),
                    token="shared",
                )
                for i in range(6)
            ]
            answers = await asyncio.gather(
                *(mailgun.deliver(second if i % 2 else client, b) for i, b in enumerate(bodies))
            )
    finally:
        await other.aclose()
    assert sorted(a.status_code for a in answers) == [200] + [401] * 5
    assert await _stored(runtime) == 2
