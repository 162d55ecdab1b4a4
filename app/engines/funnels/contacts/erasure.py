"""Deleting a contact erases what we stored about them, everywhere; an export answers an access
request with everything stored about one contact.

The rows stay (runs, steps, effects and delivery records keep their history and their counts),
emptied of what could identify the person: the contact's attributes, the properties of their
events, the raw payloads of inbound events attributed to them, the run contexts, the steps'
outputs and decisions, the outbox payloads (address, rendered bodies), the effects' results,
delivery details and campaign recipients' details. What suppression needs survives: the contact
row keeps its ``suppressed`` map, without an address.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, delete, select, update

from app.db.session import ReadSession, WriteSession
from app.engines.funnels.campaigns.models import Campaign, CampaignEvent, Recipient
from app.engines.funnels.events.models import InboundEvent, SegmentMember
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
    ContactList,
    ContactTag,
    DeliveryEvent,
    ListMember,
    OutboxEffect,
    Run,
    Step,
    Tag,
)
from app.engines.funnels.outside.models import EffectResult


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


async def erase_personal_data(session: WriteSession, contact_id: int) -> None:
    """Empty every stored trace of the contact (called by ``delete_contact`` in its
    transaction). Core UPDATEs: one statement per table, whatever the history's size."""
    runs = select(Run.id).where(Run.contact_id == contact_id).scalar_subquery()
    effects = select(OutboxEffect.id).where(OutboxEffect.contact_id == contact_id).scalar_subquery()
    statements = [
        update(_table(ContactEvent))
        .where(_table(ContactEvent).c.contact_id == contact_id)
        .values(properties={}),
        update(_table(InboundEvent))
        .where(_table(InboundEvent).c.contact_id == contact_id)
        .values(payload={}, outcome="erased with the contact"),
        update(_table(Run))
        .where(_table(Run).c.contact_id == contact_id)
        .values(context={}, last_error=None),
        update(_table(Step)).where(_table(Step).c.run_id.in_(runs)).values(output={}, decision=""),
        update(_table(OutboxEffect))
        .where(_table(OutboxEffect).c.contact_id == contact_id)
        .values(payload={"erased": True}, last_error=None),
        update(_table(EffectResult))
        .where(_table(EffectResult).c.outbox_id.in_(effects))
        .values(result={}, error=None),
        update(_table(DeliveryEvent))
        .where(_table(DeliveryEvent).c.contact_id == contact_id)
        .values(detail=""),
        update(_table(Recipient))
        .where(_table(Recipient).c.contact_id == contact_id)
        .values(detail=None),
        delete(_table(SegmentMember)).where(_table(SegmentMember).c.contact_id == contact_id),
    ]
    for statement in statements:
        await session.execute(statement)


def _row(obj: Any) -> dict[str, Any]:
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}


async def export_contact(session: ReadSession, contact: Contact) -> dict[str, Any]:
    """Everything stored about one contact, as JSON-ready data (access requests)."""
    cid = contact.id

    async def rows(stmt: Any) -> list[dict[str, Any]]:
        return [_row(r) for r in await session.scalars(stmt)]

    tags = list(
        await session.scalars(
            select(Tag.name)
            .join(ContactTag, ContactTag.tag_id == Tag.id)
            .where(ContactTag.contact_id == cid)
        )
    )
    lists = list(
        await session.scalars(
            select(ContactList.name)
            .join(ListMember, ListMember.list_id == ContactList.id)
            .where(ListMember.contact_id == cid)
        )
    )
    run_ids = select(Run.id).where(Run.contact_id == cid).scalar_subquery()
    recipients = await rows(select(Recipient).where(Recipient.contact_id == cid))
    campaign_events: list[dict[str, Any]] = []
    for recipient in recipients:
        campaign_events += await rows(
            select(CampaignEvent).where(
                CampaignEvent.campaign_id == recipient["campaign_id"],
                CampaignEvent.seq == recipient["seq"],
            )
        )
    campaign_names = {
        c.id: c.name
        for c in await session.scalars(
            select(Campaign).where(Campaign.id.in_({r["campaign_id"] for r in recipients}))
        )
    }
    for recipient in recipients:
        recipient["campaign_name"] = campaign_names.get(recipient["campaign_id"])
    effects = select(OutboxEffect.id).where(OutboxEffect.contact_id == cid).scalar_subquery()
    return {
        "contact": _row(contact),
        "tags": sorted(tags),
        "lists": sorted(lists),
        "events": await rows(
            select(ContactEvent).where(ContactEvent.contact_id == cid).order_by(ContactEvent.id)
        ),
        "inbound_events": await rows(
            select(InboundEvent).where(InboundEvent.contact_id == cid).order_by(InboundEvent.id)
        ),
        "runs": await rows(select(Run).where(Run.contact_id == cid).order_by(Run.id)),
        "steps": await rows(
            select(Step).where(Step.run_id.in_(run_ids)).order_by(Step.run_id, Step.seq)
        ),
        "messages": await rows(
            select(OutboxEffect).where(OutboxEffect.contact_id == cid).order_by(OutboxEffect.id)
        ),
        "effect_results": await rows(
            select(EffectResult).where(EffectResult.outbox_id.in_(effects))
        ),
        "delivery_events": await rows(
            select(DeliveryEvent).where(DeliveryEvent.contact_id == cid).order_by(DeliveryEvent.id)
        ),
        "campaigns": recipients,
        "campaign_events": campaign_events,
    }
