"""What the funnels API and dashboard read and show: contacts with their tags and lists, custom
field definitions, who a segment matches now, a funnel with its live figures, and the event feeds.

Read-only queries (they take a :data:`~app.db.session.ReadSession`), so the web layer shapes
answers without building statements of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from app.db import keyset
from app.db.session import ReadSession
from app.db.tenancy import scoped_exists, scoped_select
from app.engines.funnels.campaigns.models import Campaign, CampaignEvent, Recipient
from app.engines.funnels.contacts import memberships as contact_memberships
from app.engines.funnels.contacts.segments import Predicate, compile_sql
from app.engines.funnels.definitions import service
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
    ContactList,
    ContactTag,
    FieldDefinition,
    Funnel,
    FunnelVersion,
    ListMember,
    Tag,
)
from app.engines.funnels.outside.models import AiUsage
from app.engines.funnels.runs.records import reports
from app.engines.funnels.schemas import ContactOut, FunnelOut, contact_out, funnel_out


async def contact_view(session: ReadSession, contact: Contact) -> ContactOut:
    """A contact as the API answers it, with its tags and lists."""
    tags, lists = await contact_memberships.memberships(session, [contact.id])
    return contact_out(contact, tags[contact.id], lists[contact.id])


async def contact_views(session: ReadSession, rows: list[Contact]) -> list[ContactOut]:
    """Several contacts with their tags and lists, in two queries."""
    tags, lists = await contact_memberships.memberships(session, [c.id for c in rows])
    return [contact_out(c, tags[c.id], lists[c.id]) for c in rows]


async def field_definitions(session: ReadSession, workspace_id: int) -> list[FieldDefinition]:
    """The workspace's custom contact fields, by key."""
    rows = await session.scalars(
        scoped_select(FieldDefinition, workspace_id).order_by(FieldDefinition.key)
    )
    return list(rows)


async def has_contacts(session: ReadSession, workspace_id: int) -> bool:
    """Whether the workspace has any contact."""
    return bool(await session.scalar(select(scoped_exists(Contact, workspace_id))))


async def has_published_funnel(session: ReadSession, workspace_id: int) -> bool:
    """Whether one of the workspace's funnels has a published version."""
    query = select(scoped_exists(Funnel, workspace_id, Funnel.current_version_id.is_not(None)))
    return bool(await session.scalar(query))


async def tag_names(session: ReadSession, workspace_id: int) -> list[str]:
    """The workspace's tags, by name."""
    rows = await session.scalars(scoped_select(Tag, workspace_id, Tag.name).order_by(Tag.name))
    return list(rows)


async def list_names(session: ReadSession, workspace_id: int) -> list[str]:
    """The workspace's contact lists, by name."""
    rows = await session.scalars(
        scoped_select(ContactList, workspace_id, ContactList.name).order_by(ContactList.name)
    )
    return list(rows)


async def tags_with_counts(session: ReadSession, workspace_id: int) -> list[tuple[str, int]]:
    """Each of the workspace's tags by name, with how many contacts carry it."""
    rows = await session.execute(
        scoped_select(Tag, workspace_id, Tag.name, func.count(ContactTag.contact_id))
        .outerjoin(ContactTag, ContactTag.tag_id == Tag.id)
        .group_by(Tag.id, Tag.name)
        .order_by(Tag.name)
    )
    return [(name, count) for name, count in rows]


async def lists_with_counts(session: ReadSession, workspace_id: int) -> list[tuple[str, int]]:
    """Each of the workspace's contact lists by name, with how many contacts are on it."""
    rows = await session.execute(
        scoped_select(
            ContactList, workspace_id, ContactList.name, func.count(ListMember.contact_id)
        )
        .outerjoin(ListMember, ListMember.list_id == ContactList.id)
        .group_by(ContactList.id, ContactList.name)
        .order_by(ContactList.name)
    )
    return [(name, count) for name, count in rows]


async def segment_matches(
    session: ReadSession,
    workspace_id: int,
    predicate: Predicate | None,
    *,
    now: datetime,
    custom: dict[str, str],
    sample: int,
) -> tuple[int, list[tuple[int, str | None]]]:
    """How many live contacts ``predicate`` matches now (every contact when it is ``None``), and
    the first ``sample`` of them by id as (id, e-mail). Check the predicate's problems first."""
    where: tuple[Any, ...] = (Contact.deleted_at.is_(None),)
    if predicate is not None:
        where += (compile_sql(predicate, workspace_id=workspace_id, now=now, custom=custom),)
    total = await session.scalar(
        scoped_select(Contact, workspace_id, func.count()).select_from(Contact).where(*where)
    )
    rows = await session.execute(
        scoped_select(Contact, workspace_id, Contact.id, Contact.email)
        .where(*where)
        .order_by(Contact.id)
        .limit(sample)
    )
    return int(total or 0), [(int(i), e) for i, e in rows.all()]


async def funnel_view(session: ReadSession, funnel: Funnel) -> FunnelOut:
    """A funnel with its published version's number, its runs by status and the messages still
    waiting in its outbox."""
    number = None
    if funnel.current_version_id is not None:
        number = await session.scalar(
            select(FunnelVersion.number).where(FunnelVersion.id == funnel.current_version_id)
        )
    counts = await service.run_counts(session, [funnel.id])
    out = funnel_out(funnel, number, counts[funnel.id])
    out.messages_in_outbox = await reports.messages_in_outbox(session, funnel.id)
    return out


async def version_numbers(session: ReadSession, workspace_id: int) -> dict[int, int]:
    """Every funnel version of the workspace: its id → its number within its funnel."""
    rows = await session.execute(
        scoped_select(FunnelVersion, workspace_id, FunnelVersion.id, FunnelVersion.number)
    )
    return {version_id: number for version_id, number in rows}


async def contact_events(
    session: ReadSession,
    workspace_id: int,
    *,
    before: int | None,
    limit: int,
    contact_id: int | None = None,
    name: str | None = None,
) -> list[ContactEvent]:
    """Up to ``limit`` of the workspace's contact events, newest first, older than ``before``."""
    stmt = scoped_select(ContactEvent, workspace_id)
    if before is not None:
        stmt = stmt.where(keyset.before(ContactEvent.id, before))
    if contact_id is not None:
        stmt = stmt.where(ContactEvent.contact_id == contact_id)
    if name:
        stmt = stmt.where(ContactEvent.name == name)
    return list(await session.scalars(stmt.order_by(ContactEvent.id.desc()).limit(limit)))


async def contact_events_with_email(
    session: ReadSession, workspace_id: int, *, limit: int
) -> list[tuple[ContactEvent, str | None]]:
    """The workspace's ``limit`` newest contact events, each with its contact's e-mail."""
    rows = await session.execute(
        scoped_select(ContactEvent, workspace_id, ContactEvent, Contact.email)
        .join(Contact, Contact.id == ContactEvent.contact_id)
        .order_by(ContactEvent.id.desc())
        .limit(limit)
    )
    return [(event, email) for event, email in rows]


async def inbound_events(
    session: ReadSession, workspace_id: int, *, before: int | None, limit: int
) -> list[InboundEvent]:
    """Up to ``limit`` events as received, newest first, older than ``before``."""
    stmt = scoped_select(InboundEvent, workspace_id)
    if before is not None:
        stmt = stmt.where(keyset.before(InboundEvent.id, before))
    return list(await session.scalars(stmt.order_by(InboundEvent.id.desc()).limit(limit)))


async def send_times_since(
    session: ReadSession, workspace_id: int, since: datetime, *, limit: int
) -> list[datetime]:
    """When the workspace's campaign messages were sent since ``since`` (at most ``limit``)."""
    rows = await session.scalars(
        scoped_select(Campaign, workspace_id, Recipient.sent_at)
        .join(Campaign, Campaign.id == Recipient.campaign_id)
        .where(Recipient.sent_at.is_not(None), Recipient.sent_at >= since)
        .limit(limit)
    )
    return [at for at in rows if at is not None]


async def campaign_send_times(
    session: ReadSession, campaign_id: int, *, limit: int
) -> list[datetime]:
    """When a campaign's messages were sent (at most ``limit``)."""
    rows = await session.scalars(
        select(Recipient.sent_at)
        .where(Recipient.campaign_id == campaign_id, Recipient.sent_at.is_not(None))
        .limit(limit)
    )
    return [at for at in rows if at is not None]


async def campaign_events(
    session: ReadSession, campaign_id: int, kinds: tuple[str, ...], *, limit: int
) -> list[tuple[datetime, str]]:
    """A campaign's delivery reports of these ``kinds``: when, and which (at most ``limit``)."""
    rows = await session.execute(
        select(CampaignEvent.at, CampaignEvent.kind)
        .where(CampaignEvent.campaign_id == campaign_id, CampaignEvent.kind.in_(kinds))
        .limit(limit)
    )
    return [(at, kind) for at, kind in rows]


async def ai_usage(
    session: ReadSession, workspace_id: int, *, before: int | None, limit: int
) -> list[AiUsage]:
    """Up to ``limit`` of the workspace's AI generations and refusals, newest first."""
    query = scoped_select(AiUsage, workspace_id)
    if before is not None:
        query = query.where(keyset.before(AiUsage.id, before))
    return list(await session.scalars(query.order_by(AiUsage.id.desc()).limit(limit)))


async def contact_emails(
    session: ReadSession, workspace_id: int, contact_ids: Iterable[int]
) -> dict[int, str | None]:
    """Each contact's e-mail address, to name contacts in tables by who they are rather than by
    their id (``None``: a contact without one, or erased)."""
    wanted = set(contact_ids)
    if not wanted:
        return {}
    rows = await session.execute(
        scoped_select(Contact, workspace_id, Contact.id, Contact.email).where(
            Contact.id.in_(wanted)
        )
    )
    return {contact_id: email for contact_id, email in rows.all()}
