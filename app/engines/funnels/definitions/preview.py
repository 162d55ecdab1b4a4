"""A message node's creative rendered for one contact, as the editor previews it while a person
types: the same renderer and variables a send uses (:mod:`app.engines.funnels.outbox.work.render`), and for
e-mail the unsubscribe links and footer a send adds, pointing at the test page (as a test send's
do, so a click unsubscribes nobody). Nothing is stored or sent.

Values a run produces (``{{vars.…}}``, ``{{http.…}}``) do not exist outside a run and render
empty, as they would for a run that has not produced them.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engines.funnels.definitions.graph import (
    Node,
    NotifyTeam,
    SendEmail,
    SendLetter,
    SendPush,
    SendSms,
)
from app.engines.funnels.definitions.trial_send import TEST_LINK
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.work.render import render, variables
from app.engines.funnels.outbox.work.unsubscribe import UnsubscribeLinks, with_links


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    """``subject``, ``text``, ``html``, ``title`` or ``body``."""
    label: str
    text: str


def previewable(node: Node) -> bool:
    return isinstance(node, SendEmail | SendSms | SendPush | SendLetter | NotifyTeam)


def preview(node: Node, contact: Contact, *, base_url: str) -> list[Part]:
    """The parts of ``node``'s message for ``contact`` (empty for a node that sends nothing)."""
    values = variables(contact, {})
    if isinstance(node, SendEmail):
        url = f"{base_url.rstrip('/')}{TEST_LINK}"
        links = UnsubscribeLinks(url=url, preferences_url=f"{url}/preferences", mailto="")
        text, html, _ = with_links(
            render(node.body, values), render(node.html, values) if node.html else None, links
        )
        parts = [
            Part("subject", "Subject", render(node.subject, values)),
            Part("text", "Text", text),
        ]
        if html is not None:
            parts.append(Part("html", "HTML part (source)", html))
        return parts
    if isinstance(node, SendSms):
        return [Part("text", "Text", render(node.text, values))]
    if isinstance(node, SendPush):
        return [
            Part("title", "Title", render(node.title, values)),
            Part("body", "Body", render(node.body, values)),
        ]
    if isinstance(node, SendLetter):
        return [Part("body", "Letter", render(node.body, values))]
    if isinstance(node, NotifyTeam):
        return [
            Part("subject", "Subject", render(node.subject, values)),
            Part("body", "Body", render(node.body, values)),
        ]
    return []
