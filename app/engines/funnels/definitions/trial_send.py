"""A test send: one ``send_email`` node of a funnel (draft or published) rendered with a chosen
contact's variables and sent to a chosen address, now.

It is marked as a test (``[Test]`` in the subject, an ``X-Sweepline-Test`` header) and counted
nowhere: no run, no step, no outbox row, no delivery record, a Message-ID our report parsers do
not recognise, and unsubscribe links that lead to a page saying it was a test (a colleague who
clicks them must not unsubscribe the contact whose variables were borrowed).

It passes the consent gate like every other message: an address the workspace must not mail —
bounced, complained, unsubscribed from all (or from the funnel's topic), consent withdrawn, or
kept suppressed from an erased contact — is refused with a 422 naming why, and nothing is sent.
Quiet hours and the frequency cap do not apply: a test goes now and is counted nowhere.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from app.db.session import ReadSession
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import Outgoing, Skip, decide
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions import service
from app.engines.funnels.definitions.graph import Definition, Graph, SendEmail
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.work.render import render, variables
from app.engines.funnels.outbox.work.unsubscribe import UnsubscribeLinks, with_links
from app.errors import ValidationFailed
from app.integrations.mail import OutgoingEmail


class RecipientSuppressed(ValidationFailed):
    """The test's address is one the workspace must not mail (the consent gate's reason)."""

    code = "recipient_suppressed"


async def check_recipient(
    session: ReadSession,
    address_key: bytes | None,
    workspace_id: int,
    definition: Definition,
    node_id: str,
    to: str,
    now: datetime,
) -> None:
    """Refuse a test to an address the consent gate would hold a message of this funnel from.

    Raises:
        RecipientSuppressed: naming ``to`` and the reason.
    """
    settings = definition.settings
    node = Graph(definition).node(node_id)
    step = isinstance(node, SendEmail) and node.transactional
    message = Outgoing("email", topic=settings.topic, transactional=settings.transactional or step)
    person = await gate.person_at(session, address_key, workspace_id, to)
    said = decide(message, person, now)
    if isinstance(said, Skip):
        raise RecipientSuppressed(
            f"to: {to} must not be mailed ({said.reason})",
            details=[{"field": "to", "message": said.reason, "code": said.code}],
        )


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


async def prepare(
    session: ReadSession,
    workspace_id: int,
    funnel_id: int,
    *,
    node_id: str,
    to: str,
    contact_id: int | None,
    draft: bool,
    base_url: str,
    domain: str,
    address_key: bytes | None,
    now: datetime,
) -> OutgoingEmail:
    """The test message of a funnel's node (its draft or its published version), with the
    variables of ``contact_id`` (none: empty values), ready to send, once the consent gate
    let its address through (:func:`check_recipient`)."""
    funnel = await service.get_funnel(session, workspace_id, funnel_id)
    if draft:
        definition = service.parse_definition(funnel.draft)
    else:
        version = await service.current_version(session, funnel)
        definition = service.parse_definition(version.definition)
    if contact_id is not None:
        person = await get_contact(session, workspace_id, contact_id)
    else:
        person = Contact(email=to, first_name="", last_name="", timezone="UTC", fields={})
    email = compose_test(
        Graph(definition),
        node_id,
        contact=person,
        to=to,
        workspace_id=workspace_id,
        base_url=base_url,
        domain=domain,
    )
    await check_recipient(session, address_key, workspace_id, definition, node_id, to, now)
    return email
