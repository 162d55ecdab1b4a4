"""The sender's reads: a campaign's next pending recipients, in ``seq`` order, with what the
consent gate knows of each now."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from app.db.session import Database
from app.engines.funnels.campaigns.models import R_PENDING, SENDING, Campaign, Recipient
from app.engines.funnels.campaigns.states import CAMPAIGNS
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import GONE, Person
from app.engines.funnels.models import Contact


@dataclass(frozen=True, slots=True)
class RecipientRow:
    seq: int
    contact_id: int
    email: str | None
    first_name: str
    last_name: str
    phone: str | None
    timezone: str
    fields: dict[str, Any]
    person: Person = field(default=GONE)
    """What the consent gate knows of the recipient now."""


def row_of(contact: Contact, seq: int = 0) -> RecipientRow:
    """A contact as the sender sees a recipient (previews and test sends)."""
    return RecipientRow(
        seq,
        contact.id or 0,
        contact.email,
        contact.first_name or "",
        contact.last_name or "",
        contact.phone,
        contact.timezone or "UTC",
        dict(contact.fields or {}),
    )


async def next_pending(
    db: Database, campaign: Campaign, limit: int, address_key: bytes | None
) -> list[RecipientRow]:
    """The next pending recipients after the checkpoint, with what the consent gate knows of
    each (one query for the rows, the gate's for the batch); none once the campaign is no longer
    sending."""
    async with db.read() as session:
        result = await session.execute(
            select(
                Recipient.seq,
                Recipient.contact_id,
                Contact.email,
                Contact.first_name,
                Contact.last_name,
                Contact.phone,
                Contact.timezone,
                Contact.fields,
            )
            .join(Contact, Contact.id == Recipient.contact_id)
            .where(
                Recipient.campaign_id == campaign.id,
                Recipient.status == R_PENDING,
                Recipient.seq > campaign.checkpoint,
                # A campaign cancelled while sending has nobody left to send to.
                select(Campaign.id)
                .where(Campaign.id == campaign.id, CAMPAIGNS.keyed(SENDING))
                .exists(),
            )
            .order_by(Recipient.seq)
            .limit(limit)
        )
        found = result.all()
        people = await gate.people(session, address_key, {r[1] for r in found})
    return [
        RecipientRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] or {}, people[r[1]])
        for r in found
    ]
