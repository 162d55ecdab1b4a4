"""What a campaign would send if it started now (FN-76): the contacts its audience matches, those
the consent gate holds back (unsubscribed, bounced, complained, without consent, outside the
campaign's topic) by reason, and those the workspace's frequency cap holds back today.

It answers from the same pieces as the sender (:func:`.work.compose.blocked`, the gate's
:func:`~app.engines.funnels.consent.gate.people`, the cap's periods), read-only: nothing is
reserved and nothing is written. The sender checks again at send time (FN-30), so the review is a
forecast, stated as one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.work.compose import message_of
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import Person, Skip, counts_against_cap, decide
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import compile_sql, decode_predicate
from app.engines.funnels.models import Contact, FrequencyCount
from app.engines.funnels.outbox.work import frequency

CHUNK = 1000


@dataclass(frozen=True, slots=True)
class Review:
    matched: int
    """Contacts the audience matches now (live, with an e-mail address)."""
    held_back: dict[str, int] = field(default_factory=dict)
    """The consent gate's reasons, each with how many it holds back."""
    capped: int = 0
    """Held back by the frequency cap (reached today's or this week's limit)."""
    cap: frequency.Cap = field(default_factory=frequency.Cap)

    @property
    def will_send(self) -> int:
        return self.matched - sum(self.held_back.values()) - self.capped


async def audience_ids(session: ReadSession, campaign: Campaign, now: datetime) -> list[int]:
    """Who the audience matches now: the snapshot's conditions without its upper contact id."""
    ws = campaign.workspace_id
    conditions = [
        Contact.workspace_id == ws,
        Contact.deleted_at.is_(None),
        Contact.email.is_not(None),
    ]
    if campaign.audience is not None:
        custom = await field_types(session, ws)
        predicate = decode_predicate(campaign.audience)
        conditions.append(compile_sql(predicate, workspace_id=ws, now=now, custom=custom))
    return list(await session.scalars(select(Contact.id).where(*conditions).order_by(Contact.id)))


async def review(
    session: ReadSession, campaign: Campaign, *, address_key: bytes | None, now: datetime
) -> Review:
    ids = await audience_ids(session, campaign, now)
    message = message_of(campaign)
    cap = await frequency.get_cap(session, campaign.workspace_id)
    capping = cap.active and counts_against_cap(message)
    held: dict[str, int] = {}
    capped = 0
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        people = await gate.people(session, address_key, chunk)
        passing: list[int] = []
        for contact_id in chunk:
            said = decide(message, people[contact_id], now)
            if isinstance(said, Skip):
                held[said.reason] = held.get(said.reason, 0) + 1
            else:
                passing.append(contact_id)
        if capping and passing:
            capped += await _at_cap(session, cap, passing, people, now)
    return Review(matched=len(ids), held_back=held, capped=capped, cap=cap)


async def _at_cap(
    session: ReadSession,
    cap: frequency.Cap,
    contact_ids: list[int],
    people: dict[int, Person],
    now: datetime,
) -> int:
    """How many of these contacts have no slot left in one of their current periods."""
    used = {
        (c, p): n
        for c, p, n in (
            await session.execute(
                select(FrequencyCount.contact_id, FrequencyCount.period, FrequencyCount.sent).where(
                    FrequencyCount.contact_id.in_(contact_ids)
                )
            )
        ).all()
    }
    full = 0
    for contact_id in contact_ids:
        periods = frequency.periods(cap, now, people[contact_id].timezone)
        if any(used.get((contact_id, p.key), 0) >= p.limit for p in periods):
            full += 1
    return full
