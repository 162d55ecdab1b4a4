"""What a tracked message carries is decided once, for campaigns and funnels alike.

Both engines compose tracked mail through :func:`~app.engines.funnels.events.tracking.tracked_parts`:
the text part's links tracked, and an HTML part carrying tracked links and the open pixel — made
from the text when the creative has none. A text-only campaign that went out without a pixel
would count no opens (FN-29) while the same words sent by a funnel did (FN-11). The end-to-end
test sends a text-only campaign to the SMTP server and counts the open its pixel records; the
contract test walks ``app/`` so that no sender composes tracking of its own.
"""

from __future__ import annotations

import ast
import email
import re
from email.message import Message
from pathlib import Path

import pytest

from app.engines.funnels.campaigns.records.counters import counters
from app.engines.funnels.campaigns.work.sender import send_until_done
from app.engines.funnels.events.tracking import MessageRef, Tracking, tracked_parts
from tests.conftest import auth
from tests.engines.funnels.campaigns.test_campaigns import _campaign, _sender
from tests.engines.funnels.factories import contact, settle

APP = Path(__file__).resolve().parents[4] / "app"
HOME = "engines/funnels/events/tracking.py"
PARTS = frozenset({"track_html", "track_text", "text_to_html"})
"""The pieces only the policy puts together."""


def _parts(raw: bytes) -> dict[str, str]:
    """The message's text parts by content type, decoded as a mail client decodes them."""
    message = email.message_from_bytes(raw)
    found: dict[str, str] = {}
    for part in message.walk():
        if isinstance(part, Message) and part.get_content_maintype() == "text":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            found[part.get_content_type()] = payload.decode(part.get_content_charset() or "ascii")
    return found


async def test_fn29_a_text_only_campaign_carries_the_pixel_and_counts_its_open(
    client, runtime, tenant, sink, clock
) -> None:
    ws = tenant.workspace_id
    await contact(runtime, ws, "ann@example.com", first_name="Ann")
    c = await _campaign(client, tenant, body="Hello {{first_name}}, see https://shop.example/sale")
    await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    sender, pool = _sender(
        runtime, sink, tracking=Tracking(runtime.settings.web.public_url, tenant.webhook_secret)
    )
    try:
        assert await send_until_done(sender, c["id"], clock)
    finally:
        await pool.aclose()
    [message] = sink.snapshot()
    head = message.raw.split(b"\r\n\r\n", 1)[0]
    assert b"Content-Type: multipart/alternative" in head
    parts = _parts(message.raw)
    assert set(parts) == {"text/plain", "text/html"}
    assert "Hello Ann" in parts["text/html"]
    # Both parts' links go through the signed redirect (the HTML shows the address it leads to).
    assert "https://shop.example/sale" not in parts["text/plain"]
    [link] = re.findall(r'href="([^"]+/t/l/[^"]+)"', parts["text/html"])
    assert 'href="https://shop.example/sale"' not in parts["text/html"]
    [pixel] = re.findall(r'<img src="([^"]+/t/o/[^"]+)"', parts["text/html"])

    followed = await client.get(
        link.replace("&amp;", "&").removeprefix(runtime.settings.web.public_url)
    )
    assert (followed.status_code, followed.headers["location"]) == (
        302,
        "https://shop.example/sale",
    )
    opened = await client.get(pixel.removeprefix(runtime.settings.web.public_url))
    assert (opened.status_code, opened.headers["content-type"]) == (200, "image/gif")
    await settle(runtime)
    async with runtime.db.read() as s:
        counted = await counters(s, c["id"])
    assert (counted.sent, counted.opened, counted.clicked) == (1, 1, 1)


@pytest.mark.parametrize("html", [None, "", "<p>Hi</p>"])
def test_every_tracked_message_has_an_html_part_with_the_pixel(html: str | None) -> None:
    tracking = Tracking("https://app.example", "s3cret")
    text, tracked_html = tracked_parts(
        "Hi, see https://a.example/x", html, tracking, MessageRef(1, 2, campaign_id=3, seq=4)
    )
    assert text.startswith("Hi, see https://app.example/t/l/")
    assert tracked_html.count("https://app.example/t/o/") == 1
    assert ("<p>Hi</p>" in tracked_html) is bool(html)
    assert ("https://app.example/t/l/" in tracked_html) is not bool(html)


def uses_of_the_parts(source: str, name: str = "<module>") -> list[str]:
    """Where ``source`` imports or names one of :data:`PARTS` (``line: name``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.ImportFrom):
            found += [f"{node.lineno}: {a.name}" for a in node.names if a.name in PARTS]
        elif isinstance(node, ast.Attribute) and node.attr in PARTS:
            found.append(f"{node.lineno}: {node.attr}")
    return found


def test_no_sender_composes_tracking_but_through_the_policy() -> None:
    offenders = {
        relative: found
        for path in sorted(APP.rglob("*.py"))
        if (relative := path.relative_to(APP).as_posix()) != HOME
        and (found := uses_of_the_parts(path.read_text(), relative))
    }
    assert offenders == {}, "compose tracked mail with tracked_parts(), not its pieces"
    assert (APP / HOME).read_text().count("def tracked_parts(") == 1


def test_the_contract_sees_a_sender_of_its_own() -> None:
    imported = "from app.engines.funnels.events.tracking import track_html\n"
    dotted = "from app.engines.funnels.events import tracking\nhtml = tracking.text_to_html(t)\n"
    assert uses_of_the_parts(imported) == ["1: track_html"]
    assert uses_of_the_parts(dotted) == ["2: text_to_html"]
    assert uses_of_the_parts("from x import tracked_parts\n") == []
