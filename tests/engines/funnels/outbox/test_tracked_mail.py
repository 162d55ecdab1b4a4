"""Funnel e-mail carries the open pixel and signed redirect links, end to end: the deliverer sends
through SMTP to the sink, the test loads the pixel and follows a link through the app, the events
are ingested and the waiting run advances (FN-11), and ``link_clicked`` starts another funnel."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.engines.funnels.events.tracking import Tracking, text_to_html, track_html, track_text
from app.engines.funnels.models import ContactEvent
from app.engines.funnels.outbox.channel import ChannelSender
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import EmailChannel
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.integrations.mail import MailSender
from app.settings import MailSettings
from tests.engines.funnels.factories import (
    Engine,
    contact,
    content,
    graph,
    node,
    published,
    runs_of,
    settle,
    setup_names,
    steps_of,
)

OFFER = "https://shop.example/offer?x=1&y=2"


@pytest.fixture
def tracked(engine: Engine, runtime) -> Engine:
    """The test engine with the e-mail channel the worker builds: tracking on."""
    mail = MailSettings(
        smtp_host=engine.sink.host,
        smtp_port=engine.sink.port,
        from_address="funnels@test.example",
        timeout_seconds=5,
    )
    tracking = WorkspaceTracking(
        runtime.db, runtime.secrets, runtime.settings.web.public_url, runtime.clock
    )
    email: ChannelSender = EmailChannel(MailSender(mail), tracking=tracking, signing=tracking)
    engine.deliverer = Deliverer(
        runtime.db,
        engine.deliverer.settings,
        lambda channel: email if channel == "email" else None,
        lease_seconds=60,
    )
    return engine


def _path(runtime, url: str) -> str:
    return url.removeprefix(runtime.settings.web.public_url)


async def _open_and_click_funnels(runtime, ws: int) -> tuple[int, int]:
    """A funnel that mails the offer and waits three days for an open, and one started by a
    click on the offer."""
    await setup_names(runtime, ws, tags=["engaged", "nudged", "clicked"])
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            node(
                "send_email",
                "hello",
                subject="Hello {{first_name}}",
                body=f"Our offer: {OFFER}.\nSee you!",
                next="w",
            ),
            node(
                "wait", "w", days=3, until_event="message_opened", next="nudge", event_next="thanks"
            ),
            node("add_tag", "nudge", tag="nudged"),
            node("add_tag", "thanks", tag="engaged"),
            triggers=[{"kind": "api_event", "event": "signup"}],
        ),
    )
    clicks, _ = await published(
        runtime,
        ws,
        graph(
            node("add_tag", "c", tag="clicked"),
            triggers=[{"kind": "link_clicked", "url_contains": "offer"}],
        ),
        name="Clicks",
    )
    return funnel_id, clicks


async def test_fn11_funnel_mail_is_tracked_and_an_open_ends_the_wait(
    client, runtime, tenant, tracked: Engine, clock
) -> None:
    """FN-11 with funnel mail: the pixel of the message the run sent records ``message_opened``
    for its effect, and the run waiting three days for an open continues at once."""
    ws = tenant.workspace_id
    funnel_id, clicks = await _open_and_click_funnels(runtime, ws)
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    await client.post(
        "/hooks/funnels/events",
        json={"event_id": "s1", "name": "signup", "contact": {"id": ann}},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    await settle(runtime)
    await tracked.drive()
    [message] = tracked.sink.messages
    # The text part's link is tracked too (text-only mail clients), the full stop left outside.
    [text_link] = re.findall(r"Our offer: (\S+/t/l/\S+?)\.\s", message.body)
    assert OFFER not in content(message.body)
    # The unsubscribe footer's links stay direct (a click on them is not a click on the offer).
    unsubscribe = message.headers["List-Unsubscribe"].split(">")[0].removeprefix("<")
    assert f'href="{unsubscribe}"' in (message.html or "")
    html = message.html or ""
    [pixel] = re.findall(r'<img src="([^"]+/t/o/[^"]+)"', html)
    [link, *footer] = re.findall(r'href="([^"]+/t/[lu]/[^"]+)"', html)
    assert "/t/l/" in link
    assert all("/t/u/" in f for f in footer)
    assert OFFER not in html  # the only link is the tracked one

    clock.advance(hours=5)
    got = await client.get(_path(runtime, pixel.replace("&amp;", "&")))
    assert got.status_code == 200
    assert got.headers["content-type"] == "image/gif"
    redirect = await client.get(_path(runtime, link.replace("&amp;", "&")))
    assert redirect.status_code == 302
    assert redirect.headers["location"] == OFFER
    from_text = await client.get(_path(runtime, text_link))
    assert (from_text.status_code, from_text.headers["location"]) == (302, OFFER)
    await settle(runtime)
    await tracked.drive()

    [run] = await runs_of(runtime, funnel_id)
    assert run.status == "completed"
    decisions = {s.node_id: s.decision for s in await steps_of(runtime, run.id)}
    assert decisions["w"] == "ended early by event 'message_opened'"
    assert "thanks" in decisions
    assert "nudge" not in decisions
    # The events name the effect of the message that was opened and clicked.
    effect = next(s.output for s in await steps_of(runtime, run.id) if s.node_id == "hello")
    async with runtime.db.read() as s:
        events = list(
            await s.scalars(
                select(ContactEvent).where(
                    ContactEvent.name.in_(["message_opened", "link_clicked"])
                )
            )
        )
    assert {e.name: e.properties["effect"] for e in events} == {
        "message_opened": effect["effect"],
        "link_clicked": effect["effect"],
    }
    assert [r.contact_id for r in await runs_of(runtime, clicks)] == [ann]


def test_text_bodies_get_an_html_alternative_with_links() -> None:
    html = text_to_html('Hi <b>"you"</b>, see https://a.example/x?y=1&z=2.\nBye')
    assert html == (
        "<div>Hi &lt;b&gt;&quot;you&quot;&lt;/b&gt;, see "
        '<a href="https://a.example/x?y=1&amp;z=2">https://a.example/x?y=1&amp;z=2</a>.<br>\n'
        "Bye</div>"
    )
    tracked = track_html(html, Tracking("https://app.example", "s3cret"), _ref())
    assert tracked.count("https://app.example/t/l/") == 1
    assert tracked.endswith('width="1" height="1" alt="">')


def test_text_parts_get_tracked_links_and_unsubscribe_links_stay_direct() -> None:
    tracking = Tracking("https://app.example", "s3cret")
    text = "See https://a.example/x?y=1, then https://app.example/t/u/tok.\nBye"
    tracked = track_text(text, tracking, _ref())
    first, rest = tracked.split(", then ")
    assert first.startswith("See https://app.example/t/l/")
    assert rest == "https://app.example/t/u/tok.\nBye"


def _ref():
    from app.engines.funnels.events.tracking import MessageRef

    return MessageRef(1, 2, effect="run-1-step-1")
