"""A test send: one ``send_email`` node of a funnel (draft or published) rendered with a chosen
contact's variables and sent to a chosen address, now.

It is marked as a test (``[Test]`` in the subject, an ``X-Sweepline-Test`` header) and counted
nowhere: no run, no step, no outbox row, no delivery record, a Message-ID our report parsers do
not recognise, and unsubscribe links that lead to a page saying it was a test (a colleague who
clicks them must not unsubscribe the contact whose variables were borrowed).
"""

from __future__ import annotations

import secrets

from app.engines.funnels.graph import Graph, SendEmail
from app.engines.funnels.models import Contact
from app.engines.funnels.render import render, variables
from app.engines.funnels.unsubscribe import UnsubscribeLinks, with_links
from app.errors import ValidationFailed
from app.integrations.mail import OutgoingEmail

TEST_TOKEN = "test-message"  # noqa: S105 - not a secret: the token of test sends' links
TEST_LINK = f"/t/u/{TEST_TOKEN}"


def compose_test(
    graph: Graph,
    node_id: str,
    *,
    contact: Contact,
    to: str,
    workspace_id: int,
    base_url: str,
    domain: str,
) -> OutgoingEmail:
    node = graph.node(node_id)
    if not isinstance(node, SendEmail):
        raise ValidationFailed.field("node_id", f"no send_email node '{node_id}' in this funnel")
    if "@" not in to or len(to) > 320 or any(c in to for c in "\r\n\x00 "):
        raise ValidationFailed.field("to", "an e-mail address")
    values = variables(contact, {})
    url = f"{base_url.rstrip('/')}{TEST_LINK}"
    links = UnsubscribeLinks(url=url, preferences_url=f"{url}/preferences", mailto="")
    text, html, _ = with_links(
        render(node.body, values), render(node.html, values) if node.html else None, links
    )
    return OutgoingEmail(
        to=[to],
        subject=f"[Test] {render(node.subject, values)}",
        text=text,
        html=html,
        message_id=f"<test-{secrets.token_hex(8)}.w{workspace_id}@{domain}>",
        headers={"X-Sweepline-Test": "1", **links.headers()},
    )
