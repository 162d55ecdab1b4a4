"""A recipient's message as the sender composes it: rendered with the recipient's values, its
preheader, its signed unsubscribe links and, when the workspace tracks, its pixel and links. The
composer's preview and test send (``trial.py``) use the same function, so what a person checks is
what recipients get."""

from __future__ import annotations

import secrets
from datetime import datetime
from html import escape
from typing import Any

from app.engines.funnels.campaigns.due.recipients import RecipientRow
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.consent.policy import SKIP, Decision, Outgoing, Skip, decide
from app.engines.funnels.events.tracking import MessageRef, Tracking, tracked_parts
from app.engines.funnels.outbox.work.render import render
from app.engines.funnels.outbox.work.unsubscribe import (
    UnsubscribeLinks,
    UnsubscribeRef,
    links_for,
    topic_of,
    with_links,
)
from app.integrations.mail import OutgoingEmail


def message_of(campaign: Campaign) -> Outgoing:
    """How the consent gate sees the campaign's messages: e-mail on its topic, never held for a
    later day (a capped recipient is skipped), exempt from marketing choices only when the
    campaign is marked transactional."""
    return Outgoing(
        "email",
        topic=campaign.topic,
        transactional=bool(campaign.transactional),
        when_capped=SKIP,
    )


def blocked(campaign: Campaign, row: RecipientRow, now: datetime) -> Decision:
    """What the consent gate says of this recipient now (checked at send time, FN-30, FN-31)."""
    if row.person.exists and not row.email:
        return Skip("the contact has no e-mail address", "no_address")
    return decide(message_of(campaign), row.person, now)


def message_id(campaign: Campaign, seq: int, domain: str) -> str:
    return f"<c{campaign.id}.r{seq}.w{campaign.workspace_id}@{domain}>"


PREHEADER = '<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">{}</div>'
"""The preheader as mail clients expect it: the first, hidden text of the HTML part."""


def _with_preheader(html: str | None, preheader: str) -> str | None:
    if html is None or not preheader:
        return html
    return PREHEADER.format(escape(preheader)) + html


def _values(row: RecipientRow) -> dict[str, Any]:
    """The merge fields of ``row``: its custom fields, then the contact's own."""
    values: dict[str, Any] = dict(row.fields or {})
    values.update(
        email=row.email or "",
        phone=row.phone or "",
        first_name=row.first_name,
        last_name=row.last_name,
        timezone=row.timezone,
    )
    return values


def compose(
    campaign: Campaign,
    row: RecipientRow,
    *,
    domain: str,
    tracking: Tracking | None,
    signing: Tracking,
    mailto_address: str = "",
    test_links: UnsubscribeLinks | None = None,
) -> OutgoingEmail:
    """The recipient's message: rendered, with its signed unsubscribe links (headers, footer,
    placeholders; none for a campaign marked transactional) and, with ``tracking``, pixel and
    links. ``test_links``: a test send (FN-77) — these links instead of the recipient's signed
    ones (a colleague who clicks them must not unsubscribe the contact whose values were
    borrowed), ``[Test]`` before the subject and a Message-ID no report parser recognises."""
    values = _values(row)
    ref = MessageRef(campaign.workspace_id, row.contact_id, campaign.id, row.seq)
    text = render(campaign.body, values)
    html = render(campaign.html, values) if campaign.html else None
    html = _with_preheader(html, render(campaign.preheader or "", values))
    headers = {"X-Sweepline-Campaign": str(campaign.id)}
    if test_links is not None:
        text, html, _ = with_links(text, html, test_links)
        headers.update({"X-Sweepline-Test": "1", **test_links.headers()})
    elif not campaign.transactional:
        links = links_for(
            signing.base_url,
            signing.secret,
            UnsubscribeRef(ref, topic_of(campaign.topic)),
            mailto_address=mailto_address,
        )
        text, html, _ = with_links(text, html, links)
        headers.update(links.headers())
    if tracking is not None and test_links is None:
        # As every tracked message: links of both parts tracked, the pixel in the HTML part (a
        # text-only campaign gets one made from its text, as funnel mail does).
        text, html = tracked_parts(text, html, tracking, ref)
    subject = render(campaign.subject, values)
    if test_links is not None:
        subject = f"[Test] {subject}"
        mid = f"<test-{secrets.token_hex(8)}.c{campaign.id}.w{campaign.workspace_id}@{domain}>"
    else:
        mid = message_id(campaign, row.seq, domain)
    return OutgoingEmail(
        to=[row.email or ""],
        subject=subject,
        text=text,
        html=html,
        message_id=mid,
        headers=headers,
    )
