"""Unsubscribing as mailbox providers require of bulk senders, and the choices it records.

Every marketing message (funnel or campaign) names a **topic** (a funnel's ``settings.topic``, a
campaign's ``topic``; ``marketing`` when unnamed) and carries, at send time:

- ``List-Unsubscribe: <https://…/t/u/TOKEN>, <mailto:…?subject=unsubscribe%20TOKEN>`` and
  ``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` (RFC 8058): a mailbox provider's
  "unsubscribe" button POSTs ``List-Unsubscribe=One-Click`` to the https URL, no page involved;
- ``{{unsubscribe_url}}`` / ``{{preferences_url}}`` in the creative replaced by the signed links,
  and a footer with them when the creative has neither.

The token is signed with the workspace's webhook secret and names the workspace, the contact, the
topic and the message (funnel effect or campaign recipient), so it cannot be forged for someone
else and the report is attributed to the message it came from.

What the contact chose is kept in ``Contact.suppressed``: ``email: unsubscribed`` for everything,
``topic:<name>: unsubscribed`` for one topic. Every sender checks it when it sends (hard case 2),
through the consent gate (:mod:`app.engines.funnels.consent.policy`). Transactional funnels and
campaigns carry no unsubscribe headers and are not held back by marketing choices; a bounce or a
complaint stops them too.
"""

from __future__ import annotations

import html as html_lib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from app.engines.funnels.definitions.validate import MERGE_VARIABLE
from app.engines.funnels.events.tracking import MessageRef, sign_token, verify_token

DEFAULT_TOPIC = "marketing"
UNSUBSCRIBE_VARIABLE = "unsubscribe_url"
PREFERENCES_VARIABLE = "preferences_url"
PLACEHOLDERS = (UNSUBSCRIBE_VARIABLE, PREFERENCES_VARIABLE)
"""Merge variables left in place when a creative is rendered and filled in at send time, when the
workspace secret that signs them is at hand (and nothing of the link is stored in the outbox)."""

ONE_CLICK_BODY = "List-Unsubscribe=One-Click"
ALL = "email"
"""The ``suppressed`` key of "no marketing e-mail at all" (the channel itself)."""
UNSUBSCRIBED = "unsubscribed"
HARD = frozenset({"bounced", "complained"})
"""Suppression reasons that stop every message to the address, transactional ones included."""


def topic_key(topic: str) -> str:
    return f"topic:{topic}"


def topic_of(value: Any) -> str:
    return value.strip() if isinstance(value, str) and value.strip() else DEFAULT_TOPIC


@dataclass(frozen=True, slots=True)
class UnsubscribeRef:
    """What an unsubscribe link points back to: the message it came in and its topic."""

    message: MessageRef
    topic: str

    def claims(self) -> dict[str, Any]:
        return {**self.message.claims(), "t": "unsub", "p": self.topic}

    @staticmethod
    def from_claims(claims: Mapping[str, Any]) -> UnsubscribeRef | None:
        if claims.get("t") != "unsub" or not isinstance(claims.get("p"), str):
            return None
        message = MessageRef.from_claims(dict(claims))
        return None if message is None else UnsubscribeRef(message, str(claims["p"]))


def unsubscribe_token(secret: str, ref: UnsubscribeRef) -> str:
    return sign_token(secret, ref.claims())


def verify_unsubscribe_token(secret: str, token: str) -> UnsubscribeRef | None:
    claims = verify_token(secret, token)
    return None if claims is None else UnsubscribeRef.from_claims(claims)


@dataclass(frozen=True, slots=True)
class UnsubscribeLinks:
    url: str
    """The one-click page (GET) and the RFC 8058 one-click endpoint (POST)."""
    preferences_url: str
    mailto: str
    """``mailto:`` URI whose subject carries the token (``None`` address: no mailto)."""

    def headers(self) -> dict[str, str]:
        targets = [f"<{self.url}>"]
        if self.mailto:
            targets.append(f"<{self.mailto}>")
        return {
            "List-Unsubscribe": ", ".join(targets),
            "List-Unsubscribe-Post": ONE_CLICK_BODY,
        }


def links_for(
    base_url: str, secret: str, ref: UnsubscribeRef, *, mailto_address: str
) -> UnsubscribeLinks:
    token = unsubscribe_token(secret, ref)
    base = f"{base_url.rstrip('/')}/t/u/{token}"
    mailto = (
        f"mailto:{mailto_address}?subject={quote('unsubscribe ' + token)}" if mailto_address else ""
    )
    return UnsubscribeLinks(url=base, preferences_url=f"{base}/preferences", mailto=mailto)


def token_from_mail_subject(subject: str) -> str | None:
    """The token of a mailto unsubscribe (``unsubscribe <token>``), ``None`` when absent."""
    words = subject.split()
    if len(words) >= 2 and words[-2].lower() == "unsubscribe":
        return words[-1]
    return None


def _fill(template: str, values: Mapping[str, str]) -> str:
    def one(match: Any) -> str:
        name = match.group(1)
        return values[name] if name in values else str(match.group(0))

    return MERGE_VARIABLE.sub(one, template)


def with_links(
    text: str, html: str | None, links: UnsubscribeLinks
) -> tuple[str, str | None, bool]:
    """The bodies with the placeholders filled in and a footer added to a body that offers no
    way out; also whether the creative placed the link itself."""
    values = {UNSUBSCRIBE_VARIABLE: links.url, PREFERENCES_VARIABLE: links.preferences_url}
    text_out = _fill(text, values)
    html_values = {k: html_lib.escape(v) for k, v in values.items()}
    html_out = None if html is None else _fill(html, html_values)
    placed = links.url in text_out
    if not placed:
        text_out = (
            f"{text_out.rstrip()}\n\n--\nUnsubscribe: {links.url}\n"
            f"Choose what you receive: {links.preferences_url}\n"
        )
    if html_out is not None and html_lib.escape(links.url) not in html_out:
        html_out += (
            '<p style="font-size:12px;color:#666">'
            f'<a href="{html_values[UNSUBSCRIBE_VARIABLE]}">Unsubscribe</a> · '
            f'<a href="{html_values[PREFERENCES_VARIABLE]}">Choose what you receive</a></p>'
        )
    return text_out, html_out, placed


def apply_report(suppressed: Mapping[str, str] | None, reason: str) -> dict[str, str]:
    """The contact's new ``suppressed`` map after a provider reported a bounce, a complaint or an
    unsubscribe. A report never weakens what is there: an unsubscribe reported after a bounce
    leaves the bounce (which also stops transactional mail) in place."""
    out = dict(suppressed or {})
    if out.get(ALL) not in HARD or reason in HARD:
        out[ALL] = reason
    return out


def apply_choice(
    suppressed: Mapping[str, str] | None,
    *,
    everything: bool,
    topics_left: set[str],
    topics_kept: set[str],
) -> dict[str, str]:
    """The contact's new ``suppressed`` map after they chose on the preference page (or in one
    click). A bounce or a complaint is never lifted by the contact's choice."""
    out = dict(suppressed or {})
    if everything:
        if out.get(ALL) not in HARD:
            out[ALL] = UNSUBSCRIBED
    elif out.get(ALL) == UNSUBSCRIBED:
        del out[ALL]
    for topic in topics_left:
        out[topic_key(topic)] = UNSUBSCRIBED
    for topic in topics_kept - topics_left:
        out.pop(topic_key(topic), None)
    return out
