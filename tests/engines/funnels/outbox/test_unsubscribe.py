"""Unsubscribing as mailbox providers require (spec §9): every marketing message received by the
SMTP sink carries List-Unsubscribe (https + mailto) and List-Unsubscribe-Post (RFC 8058), its
link works in one click, a one-click POST stops the next message of the funnel at send time
(hard case 2), a transactional funnel still sends, and the preference page leaves one topic."""

from __future__ import annotations

import re
from email import policy
from email.message import EmailMessage
from urllib.parse import unquote

import pytest
from sqlalchemy import select

from app.engines.funnels.models import Contact, ContactEvent, DeliveryEvent, OutboxEffect
from app.sandbox.smtp import ReceivedMessage
from tests.engines.funnels.factories import (
    Engine,
    contact,
    email_node,
    graph,
    node,
    published,
    runs_of,
)

pytestmark = pytest.mark.usefixtures("sink")


def _https(message: ReceivedMessage) -> str:
    return re.findall(r"<(https?://[^>]+)>", message.headers["List-Unsubscribe"])[0]


def _mailto(message: ReceivedMessage) -> str:
    return re.findall(r"<(mailto:[^>]+)>", message.headers["List-Unsubscribe"])[0]


def _path(runtime, url: str) -> str:
    return url.removeprefix(runtime.settings.web.public_url)


def _two_mails(topic: str = "marketing", **settings) -> dict:
    return graph(
        email_node("first", subject="First", body="Hello {{first_name}}", next="w"),
        node("wait", "w", days=1, next="second"),
        email_node("second", subject="Second", body="Still here?"),
        triggers=[{"kind": "manual"}],
        settings={"topic": topic, **settings},
    )


async def _enrol(runtime, funnel_id: int, contact_id: int) -> None:
    from app.engines.funnels.models import Funnel, FunnelVersion
    from app.engines.funnels.runs.due.entry import enter

    async with runtime.db.write() as uow:
        version = await uow.session.scalar(
            select(FunnelVersion)
            .join(Funnel, Funnel.current_version_id == FunnelVersion.id)
            .where(Funnel.id == funnel_id)
        )
        assert version is not None
        await enter(uow.session, version=version, contact_id=contact_id, now=runtime.clock.now())


async def _suppressed(runtime, contact_id: int) -> dict[str, str]:
    async with runtime.db.read() as s:
        found = await s.get(Contact, contact_id)
        assert found is not None
        return dict(found.suppressed or {})


async def test_marketing_mail_has_both_headers_and_a_one_click_post_stops_the_funnel(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    funnel_id, _ = await published(runtime, ws, _two_mails())
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    await _enrol(runtime, funnel_id, ann)
    await engine.drive()

    [first] = engine.sink.messages
    assert first.headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    https, mailto = _https(first), _mailto(first)
    assert https.startswith(f"{runtime.settings.web.public_url}/t/u/")
    assert mailto.startswith("mailto:unsubscribe@test.example?subject=unsubscribe%20")
    # The footer offers the same link in the text part (the creative had none).
    assert f"Unsubscribe: {https}" in first.body
    assert first.body.startswith("Hello Ann")

    # The link works: a page with one button, and GET alone changes nothing (link scanners).
    page = await client.get(_path(runtime, https))
    assert page.status_code == 200
    assert "<button type='submit' name='scope' value='topic'>Unsubscribe</button>" in page.text
    assert await _suppressed(runtime, ann) == {}

    # RFC 8058: the mailbox provider POSTs the one-click body, no cookies, no page.
    posted = await client.post(
        _path(runtime, https),
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert posted.status_code == 200
    assert await _suppressed(runtime, ann) == {"topic:marketing": "unsubscribed"}

    # The next message of the funnel is checked at send time and not sent.
    await engine.advance(days=1, minutes=1)
    assert len(engine.sink.messages) == 1
    [run] = await runs_of(runtime, funnel_id)
    assert run.status == "completed"
    async with runtime.db.read() as s:
        second = await s.scalar(select(OutboxEffect).where(OutboxEffect.node_id == "second"))
        assert second is not None
        assert second.status == "skipped"
        assert second.last_error == "unsubscribed from topic 'marketing'"
        # The unsubscribe is attributed to the message it came in, and is a contact event.
        kinds = {
            (e.outbox_id, e.kind)
            for e in await s.scalars(
                select(DeliveryEvent).where(DeliveryEvent.kind == "unsubscribed")
            )
        }
        first_effect = await s.scalar(
            select(OutboxEffect.id).where(OutboxEffect.node_id == "first")
        )
        assert kinds == {(first_effect, "unsubscribed")}
        [event] = await s.scalars(
            select(ContactEvent).where(ContactEvent.name == "email_unsubscribed")
        )
        assert event.properties["how"] == "one-click"


async def test_one_click_as_multipart_and_a_transactional_funnel_still_sends(
    client, runtime, tenant, engine: Engine
) -> None:
    """A one-click POST in multipart/form-data (RFC 8058's own example) works the same; the
    contact who left marketing mail still gets the mail of a funnel marked transactional, and
    that mail carries no unsubscribe headers."""
    ws = tenant.workspace_id
    news, _ = await published(runtime, ws, _two_mails("news"))
    receipts, _ = await published(
        runtime, ws, _two_mails("receipts", transactional=True), name="Receipts"
    )
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    await _enrol(runtime, news, ann)
    await engine.drive()
    [newsletter] = engine.sink.messages
    boundary = "XyZ"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\n'
        f"One-Click\r\n--{boundary}--\r\n"
    ).encode()
    posted = await client.post(
        _path(runtime, _https(newsletter)),
        content=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert posted.status_code == 200
    assert await _suppressed(runtime, ann) == {"topic:news": "unsubscribed"}
    # Even "everything" leaves transactional mail alone.
    page = await client.post(_path(runtime, _https(newsletter)), data={"scope": "all"})
    assert page.status_code == 200
    assert (await _suppressed(runtime, ann))["email"] == "unsubscribed"

    await _enrol(runtime, receipts, ann)
    await engine.drive()
    await engine.advance(days=1, minutes=1)
    subjects = [(m.subject, "List-Unsubscribe" in m.headers) for m in engine.sink.messages]
    assert subjects == [("First", True), ("First", False), ("Second", False)]


async def test_placed_link_preference_page_and_mailto(
    client, runtime, tenant, engine: Engine
) -> None:
    """``{{unsubscribe_url}}`` renders the signed link (no second footer); the preference page
    leaves one topic and keeps another; a mail to the mailto target, relayed raw, works too."""
    ws = tenant.workspace_id
    tips, _ = await published(
        runtime,
        ws,
        graph(
            email_node(
                "t",
                subject="Tip",
                body="A tip. Leave: {{unsubscribe_url}} or choose: {{ preferences_url }}",
                html='<p>A tip. <a href="{{unsubscribe_url}}">Leave</a></p>',
            ),
            triggers=[{"kind": "manual"}],
            settings={"topic": "tips"},
        ),
        name="Tips",
    )
    news, _ = await published(runtime, ws, _two_mails("news"), name="News")
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    bob = await contact(runtime, ws, "bob@example.com", first_name="Bob")
    await _enrol(runtime, tips, ann)
    await _enrol(runtime, tips, bob)
    await engine.drive()
    by_to = {m.to[0]: m for m in engine.sink.messages}
    tip = by_to["ann@example.com"]
    https = _https(tip)
    assert tip.body.strip() == f"A tip. Leave: {https} or choose: {https}/preferences"
    assert tip.html is not None
    assert f'<a href="{https}">Leave</a>' in tip.html
    assert tip.html.count("/t/u/") == 1  # no footer: the creative placed the link

    prefs = await client.get(_path(runtime, f"{https}/preferences"))
    assert prefs.status_code == 200
    assert "value='news' checked" in prefs.text
    assert "value='tips' checked" in prefs.text
    saved = await client.post(_path(runtime, f"{https}/preferences"), data={"topic": ["news"]})
    assert saved.status_code == 200
    assert await _suppressed(runtime, ann) == {"topic:tips": "unsubscribed"}

    # Bob writes to the mailto address; the mailbox relays the raw message.
    relayed = EmailMessage(policy=policy.SMTP)
    relayed["From"] = "bob@example.com"
    relayed["To"] = "unsubscribe@test.example"
    relayed["Subject"] = unquote(_mailto(by_to["bob@example.com"]).partition("subject=")[2])
    relayed.set_content("")
    got = await client.post(
        "/t/unsubscribe-mail",
        content=relayed.as_bytes(),
        headers={"Content-Type": "message/rfc822"},
    )
    assert got.status_code == 202
    assert await _suppressed(runtime, bob) == {"topic:tips": "unsubscribed"}

    # Ann still gets "news"; she left "tips" only.
    await _enrol(runtime, news, ann)
    await engine.drive()
    assert [m.subject for m in engine.sink.messages if m.to == ["ann@example.com"]] == [
        "Tip",
        "First",
    ]


async def test_a_forged_or_foreign_token_changes_nothing(
    client, runtime, tenant, other_tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    funnel_id, _ = await published(runtime, ws, _two_mails())
    ann = await contact(runtime, ws, "ann@example.com")
    await _enrol(runtime, funnel_id, ann)
    await engine.drive()
    https = _https(engine.sink.messages[0])
    body, _, mac = https.rpartition(".")
    forged = f"{body}.{'A' * len(mac)}"
    for url in (forged, f"{forged}/preferences"):
        assert (await client.get(_path(runtime, url))).status_code == 404
        assert (await client.post(_path(runtime, url), data={"scope": "all"})).status_code == 404
    bad_mail = b"Subject: unsubscribe nothing.here\r\n\r\n"
    refused = await client.post("/t/unsubscribe-mail", content=bad_mail)
    assert refused.status_code == 422
    assert await _suppressed(runtime, ann) == {}


async def test_campaign_mail_carries_the_headers_and_its_unsubscribe_is_counted(
    client, runtime, tenant, sink
) -> None:
    from app.engines.funnels.campaigns.records.counters import counters
    from app.engines.funnels.campaigns.work.sender import send_until_done
    from app.engines.funnels.events.tracking import Tracking
    from tests.conftest import auth
    from tests.engines.funnels.campaigns.test_campaigns import _campaign, _sender

    ws = tenant.workspace_id
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    await contact(runtime, ws, "bob@example.com", first_name="Bob")
    c = await _campaign(client, tenant, topic="news")
    assert c["topic"] == "news"
    started = await client.post(
        f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant)
    )
    assert started.status_code == 200, started.text
    signing = Tracking(runtime.settings.web.public_url, tenant.webhook_secret)
    sender, pool = _sender(runtime, sink, signing=signing, mailto_address="u@test.example")
    try:
        assert await send_until_done(sender, c["id"], runtime.clock)
    finally:
        await pool.aclose()
    by_to = {m.to[0]: m for m in sink.messages}
    assert set(by_to) == {"ann@example.com", "bob@example.com"}
    for message in by_to.values():
        assert message.headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert _mailto(message).startswith("mailto:u@test.example?subject=")
        assert f"Unsubscribe: {_https(message)}" in message.body
    posted = await client.post(
        _path(runtime, _https(by_to["ann@example.com"])),
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert posted.status_code == 200
    assert await _suppressed(runtime, ann) == {"topic:news": "unsubscribed"}
    async with runtime.db.read() as s:
        assert (await counters(s, c["id"])).unsubscribed == 1
