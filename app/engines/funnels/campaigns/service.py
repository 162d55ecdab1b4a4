"""Campaign lifecycle: create, edit while a draft, schedule, cancel; and the delivery reports
stored for the counters (FN-29, read in :mod:`.records.counters`).

The audience is materialised **once** (see :mod:`.due.audience`, which takes it in bounded
chunks): a second attempt is refused — re-resolving would silently add everyone who joined after
the send started.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from app.db.dialect import insert
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.campaigns.models import (
    CANCELLED,
    DRAFT,
    SCHEDULED,
    Campaign,
    CampaignEvent,
    Recipient,
)
from app.engines.funnels.campaigns.states import CAMPAIGNS
from app.engines.funnels.contacts.fields import check_predicate
from app.engines.funnels.contacts.saved_segments import bind
from app.engines.funnels.contacts.segments import Predicate, decode_predicate
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import audit


class CampaignNotFound(NotFound):
    code = "campaign_not_found"


class CampaignNotEditable(Conflict):
    code = "campaign_not_editable"


@dataclass(frozen=True, slots=True)
class CampaignData:
    name: str
    subject: str
    body: str
    html: str | None = None
    audience: dict[str, Any] | None = None
    rate_per_minute: int = 600
    topic: str = "marketing"
    transactional: bool = False
    holdout: dict[str, Any] | None = None
    """A control share that gets nothing (the fields of
    :class:`~app.engines.funnels.definitions.graph.Holdout`)."""
    preheader: str = ""


async def checked_audience(
    session: ReadSession, workspace_id: int, raw: dict[str, Any] | None
) -> Predicate | None:
    """The audience's predicate, held to the rules a segment is held to against the workspace's
    fields (a value of its field's type, an operator that applies to it, a field that exists).

    Raises:
        ValidationFailed: naming ``audience``, one detail per problem.
    """
    if raw is None:
        return None
    try:
        predicate = decode_predicate(raw)
    except msgspec.ValidationError as exc:
        raise ValidationFailed.field("audience", str(exc)) from None
    await check_predicate(session, workspace_id, predicate, field="audience")
    return predicate


async def _check(
    session: ReadSession, workspace_id: int, data: CampaignData
) -> dict[str, Any] | None:
    """The audience as stored: checked, with its saved segments' conditions bound in."""
    if not data.name.strip():
        raise ValidationFailed.field("name", "must not be empty")
    if not data.subject.strip():
        raise ValidationFailed.field("subject", "a campaign needs a subject")
    if not data.body.strip():
        raise ValidationFailed.field("body", "a campaign needs a body")
    if not 1 <= data.rate_per_minute <= 100_000:
        raise ValidationFailed.field("rate_per_minute", "between 1 and 100000")
    if len(data.preheader) > 500:
        raise ValidationFailed.field("preheader", "at most 500 characters")
    audience: dict[str, Any] | None = await bind(session, workspace_id, data.audience)
    await checked_audience(session, workspace_id, audience)
    return audience


async def create_campaign(
    session: WriteSession, workspace_id: int, data: CampaignData, now: datetime
) -> Campaign:
    audience = await _check(session, workspace_id, data)
    campaign = Campaign(
        workspace_id=workspace_id,
        name=data.name.strip(),
        subject=data.subject,
        preheader=data.preheader.strip(),
        body=data.body,
        html=data.html,
        topic=data.topic.strip() or "marketing",
        transactional=data.transactional,
        audience=audience,
        holdout=data.holdout,
        **CAMPAIGNS.create(DRAFT),
        rate_per_minute=data.rate_per_minute,
        audience_size=0,
        checkpoint=0,
        created_at=now,
        updated_at=now,
    )
    session.add(campaign)
    await session.flush()
    return campaign


async def get_campaign(session: ReadSession, workspace_id: int, campaign_id: int) -> Campaign:
    campaign = await session.scalar(
        scoped_select(Campaign, workspace_id).where(Campaign.id == campaign_id)
    )
    if campaign is None:
        raise CampaignNotFound(f"campaign {campaign_id} not found")
    return campaign


async def list_campaigns(
    session: ReadSession, workspace_id: int, *, after: int | None = None, limit: int = 50
) -> list[Campaign]:
    stmt = scoped_select(Campaign, workspace_id)
    if after is not None:
        stmt = stmt.where(Campaign.id < after)
    return list(await session.scalars(stmt.order_by(Campaign.id.desc()).limit(limit)))


async def update_campaign(
    session: WriteSession, workspace_id: int, campaign_id: int, data: CampaignData, now: datetime
) -> Campaign:
    campaign = await get_campaign(session, workspace_id, campaign_id)
    if campaign.status not in (DRAFT, SCHEDULED) or campaign.materialised_at is not None:
        raise CampaignNotEditable(f"campaign {campaign_id} is {campaign.status}: not editable")
    audience = await _check(session, workspace_id, data)
    campaign.name = data.name.strip()
    campaign.subject = data.subject
    campaign.preheader = data.preheader.strip()
    campaign.body = data.body
    campaign.html = data.html
    campaign.topic = data.topic.strip() or "marketing"
    campaign.transactional = data.transactional
    campaign.audience = audience
    campaign.holdout = data.holdout
    campaign.rate_per_minute = data.rate_per_minute
    campaign.updated_at = now
    await session.flush()
    await _audit(session, "campaign.updated", campaign, now)
    return campaign


async def schedule_campaign(
    session: WriteSession, workspace_id: int, campaign_id: int, send_at: datetime, now: datetime
) -> Campaign:
    """Send at ``send_at`` (now or later). Only a draft or a scheduled campaign may be
    (re)scheduled, and only with an audience that holds against the workspace's fields."""
    campaign = await get_campaign(session, workspace_id, campaign_id)
    if campaign.status not in (DRAFT, SCHEDULED):
        raise CampaignNotEditable(f"campaign {campaign_id} is {campaign.status}")
    await checked_audience(session, workspace_id, campaign.audience)
    CAMPAIGNS.move(campaign, SCHEDULED)
    campaign.send_at = max(send_at, now)
    campaign.updated_at = now
    await session.flush()
    action = "campaign.sent" if campaign.send_at <= now else "campaign.scheduled"
    await _audit(session, action, campaign, now)
    return campaign


async def _audit(session: WriteSession, action: str, campaign: Campaign, now: datetime) -> None:
    send_at = campaign.send_at.isoformat() if campaign.send_at else None
    await audit.record(
        session,
        action=action,
        object_type="campaign",
        object_id=campaign.id,
        workspace_id=campaign.workspace_id,
        after={"name": campaign.name, "status": campaign.status, "send_at": send_at},
        now=now,
    )


async def cancel_campaign(
    session: WriteSession, workspace_id: int, campaign_id: int, now: datetime
) -> Campaign:
    """Stop a campaign; recipients not yet sent stay unsent."""
    campaign = await get_campaign(session, workspace_id, campaign_id)
    if campaign.status in (CANCELLED,) or campaign.finished_at is not None:
        raise CampaignNotEditable(f"campaign {campaign_id} is {campaign.status}")
    CAMPAIGNS.move(campaign, CANCELLED)
    campaign.finished_at = now
    campaign.updated_at = now
    await session.flush()
    await _audit(session, "campaign.cancelled", campaign, now)
    return campaign


async def record_delivery_event(
    session: WriteSession,
    *,
    workspace_id: int,
    campaign_id: int,
    seq: int,
    kind: str,
    external_id: str | None,
    at: datetime,
) -> int | None:
    """Store one delivery report about a recipient; returns the recipient's contact id (``None``
    when there is no such recipient in this workspace). A report repeated with the same sender id
    is stored once; counters count distinct recipients, so even a repeat under a new id cannot
    inflate them (FN-29)."""
    contact_id = await session.scalar(
        scoped_select(Campaign, workspace_id, Recipient.contact_id)
        .join(Campaign, Campaign.id == Recipient.campaign_id)
        .where(Recipient.campaign_id == campaign_id, Recipient.seq == seq)
    )
    if contact_id is None:
        return None
    await session.execute(
        insert(session, CampaignEvent)
        .values(campaign_id=campaign_id, seq=seq, kind=kind, external_id=external_id, at=at)
        .on_conflict_do_nothing()
    )
    return int(contact_id)
