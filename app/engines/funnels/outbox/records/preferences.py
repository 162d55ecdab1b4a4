"""What a contact chooses through an unsubscribe link: leave the message's topic, leave several
topics on the preference page, or leave all marketing e-mail.

The choice is written at once (the next send checks it, hard case 2), recorded as the contact
event ``email_unsubscribed`` and attributed to the message the link came in: a delivery event of
the funnel effect (per-node ``unsubscribed``) or a campaign event (the campaign's counter).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.service import record_delivery_event
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.events.records.delivery_reports import record_funnel_report
from app.engines.funnels.models import Contact, Funnel, FunnelVersion
from app.engines.funnels.outbox.work.unsubscribe import (
    ALL,
    UNSUBSCRIBED,
    UnsubscribeRef,
    apply_choice,
    topic_key,
    topic_of,
)


async def contact_of(session: ReadSession, ref: UnsubscribeRef) -> Contact | None:
    """The (not deleted) contact a link names, in the workspace that signed it."""
    return await session.scalar(
        scoped_select(Contact, ref.message.workspace_id).where(
            Contact.id == ref.message.contact_id,
            Contact.deleted_at.is_(None),
        )
    )


async def workspace_topics(session: ReadSession, workspace_id: int, contact: Contact) -> list[str]:
    """The topics a contact can choose from: those of the workspace's funnels (draft and
    published) and campaigns, and any they already left."""
    topics: set[str] = set()
    drafts = await session.scalars(scoped_select(Funnel, workspace_id, Funnel.draft))
    versions = await session.scalars(
        # The funnel's workspace scopes its current version (the join's other side).
        scoped_select(Funnel, workspace_id, FunnelVersion.definition).join(
            Funnel, Funnel.current_version_id == FunnelVersion.id
        )
    )
    for definition in [*drafts, *versions]:
        settings = (definition or {}).get("settings") or {}
        if not settings.get("transactional"):
            topics.add(topic_of(settings.get("topic")))
    campaign_topics = await session.scalars(
        scoped_select(Campaign, workspace_id, Campaign.topic).distinct()
    )
    topics.update(topic_of(t) for t in campaign_topics)
    for key in contact.suppressed or {}:
        if key.startswith("topic:"):
            topics.add(key.removeprefix("topic:"))
    return sorted(topics)


def subscribed(contact: Contact, topic: str) -> bool:
    return not (contact.suppressed or {}).get(topic_key(topic))


def everything_left(contact: Contact) -> bool:
    return bool((contact.suppressed or {}).get(ALL))


@dataclass(frozen=True, slots=True)
class Choice:
    everything: bool
    """Leave all marketing e-mail."""
    left: frozenset[str] = frozenset()
    kept: frozenset[str] = frozenset()
    """Topics the contact stays subscribed to (or comes back to)."""


async def choose(
    session: WriteSession, ref: UnsubscribeRef, choice: Choice, *, how: str, now: datetime
) -> Contact | None:
    """Apply the contact's choice; ``None`` when the link's contact no longer exists."""
    contact = await contact_of(session, ref)
    if contact is None:
        return None
    before = dict(contact.suppressed or {})
    after = apply_choice(
        before,
        everything=choice.everything,
        topics_left=set(choice.left),
        topics_kept=set(choice.kept),
    )
    newly_left = [k for k, v in after.items() if v == UNSUBSCRIBED and before.get(k) != v]
    if after != before:
        contact.suppressed = after
        contact.updated_at = now
        await session.flush()
    if newly_left:
        await _report(session, ref, contact, newly_left, how=how, now=now)
    return contact


async def _report(
    session: WriteSession,
    ref: UnsubscribeRef,
    contact: Contact,
    left: list[str],
    *,
    how: str,
    now: datetime,
) -> None:
    message = ref.message
    detail = f"{how}: {', '.join(sorted(left))}"
    if message.effect is not None:
        await record_funnel_report(
            session,
            workspace_id=message.workspace_id,
            effect_key=message.effect,
            kind="unsubscribed",
            detail=detail,
            at=now,
        )
    if message.campaign_id is not None and message.seq is not None:
        await record_delivery_event(
            session,
            workspace_id=message.workspace_id,
            campaign_id=message.campaign_id,
            seq=message.seq,
            kind="unsubscribed",
            external_id=None,
            at=now,
        )
    await record_event(
        session,
        workspace_id=message.workspace_id,
        contact_id=contact.id,
        name="email_unsubscribed",
        source="unsubscribe",
        now=now,
        occurred_at=now,
        external_id=None,
        properties={
            "topic": ref.topic,
            "left": sorted(left),
            "how": how,
            "effect": message.effect,
            "campaign_id": message.campaign_id,
        },
    )
