"""A contact's facts for the segment predicates' Python evaluator: attributes, custom fields, tags,
lists and event history, for many contacts in a few queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from datetime import datetime, timedelta

from sqlalchemy import select

from app.db.dialect import one_of
from app.db.session import ReadSession
from app.engines.funnels.contacts.memberships import memberships
from app.engines.funnels.contacts.segments import ContactFacts
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
)


async def load_facts(
    session: ReadSession,
    contacts: Sequence[Contact],
    *,
    event_names: Set[str],
    since: datetime | None,
    tags: bool = True,
    lists: bool = True,
) -> dict[int, ContactFacts]:
    """Facts for predicate evaluation, for many contacts in a few queries; with ``tags`` or
    ``lists`` false, the facts hold none (for predicates that look at neither)."""
    ids = [c.id for c in contacts]
    tags_of, lists_of = await memberships(session, ids, tags=tags, lists=lists)
    events: dict[int, list[tuple[str, datetime]]] = {c: [] for c in ids}
    if event_names and ids:
        stmt = select(ContactEvent.contact_id, ContactEvent.name, ContactEvent.occurred_at).where(
            one_of(session, ContactEvent.contact_id, ids),
            ContactEvent.name.in_(sorted(event_names)),
        )
        if since is not None:
            stmt = stmt.where(ContactEvent.occurred_at >= since)
        for cid, name, at in (await session.execute(stmt)).all():
            events[cid].append((name, at))
    return {c.id: facts_of(c, tags_of[c.id], lists_of[c.id], events[c.id]) for c in contacts}


def facts_of(
    contact: Contact,
    tags: Iterable[str],
    lists: Iterable[str],
    events: Iterable[tuple[str, datetime]],
) -> ContactFacts:
    return ContactFacts(
        attributes={
            "email": contact.email,
            "phone": contact.phone,
            "first_name": contact.first_name,
            "last_name": contact.last_name,
            "timezone": contact.timezone,
        },
        fields=dict(contact.fields or {}),
        tags=frozenset(tags),
        lists=frozenset(lists),
        events=tuple(events),
    )


def facts_window(now: datetime, days: int | None) -> datetime | None:
    return None if days is None else now - timedelta(days=days)
