"""Tables of campaigns: the campaign, its recipients (the audience snapshot, numbered) and the
delivery events its counters are recomputed from."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.funnels.campaigns.recipient_states import R_FAILED as R_FAILED
from app.engines.funnels.campaigns.recipient_states import R_PENDING as R_PENDING
from app.engines.funnels.campaigns.recipient_states import R_SENT as R_SENT
from app.engines.funnels.campaigns.recipient_states import R_SKIPPED as R_SKIPPED
from app.engines.funnels.campaigns.recipient_states import RECIPIENTS as RECIPIENTS
from app.engines.funnels.campaigns.states import CAMPAIGNS as CAMPAIGNS
from app.engines.funnels.campaigns.states import CANCELLED as CANCELLED
from app.engines.funnels.campaigns.states import DONE as DONE
from app.engines.funnels.campaigns.states import DRAFT as DRAFT
from app.engines.funnels.campaigns.states import DUE_STATUSES as DUE_STATUSES
from app.engines.funnels.campaigns.states import MATERIALISING as MATERIALISING
from app.engines.funnels.campaigns.states import SCHEDULED as SCHEDULED
from app.engines.funnels.campaigns.states import SENDING as SENDING

FK = BigId


COUNTED_KINDS = ("delivered", "opened", "clicked", "bounced", "complained", "unsubscribed")


class Campaign(Base):
    __tablename__ = "campaigns"
    __table_args__ = (
        Index("ix_campaigns_workspace", "workspace_id", "id"),
        Index(
            "ix_campaigns_due",
            "send_at",
            sqlite_where=text(CAMPAIGNS.where(*DUE_STATUSES)),
            postgresql_where=text(CAMPAIGNS.where(*DUE_STATUSES)),
        ),
        CAMPAIGNS.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    subject: Mapped[str] = mapped_column(String(500))
    preheader: Mapped[str] = mapped_column(String(500), default="", server_default="")
    """The line mail clients show after the subject (a hidden first line of the HTML part)."""
    body: Mapped[str] = mapped_column(Text)
    html: Mapped[str | None] = mapped_column(Text, nullable=True)
    topic: Mapped[str] = mapped_column(String(100), default="marketing", server_default="marketing")
    """What the campaign is about, as the preference page names it (see ``unsubscribe``)."""
    transactional: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """A notice every recipient must get (terms changed, a service notice): sent without
    unsubscribe links and despite marketing opt-outs, never after a bounce or a complaint, and
    not counted against the frequency cap (see :mod:`app.engines.funnels.consent.policy`)."""
    audience: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    """A segment predicate (``None``: every contact with an e-mail address)."""
    holdout: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    """A control share of the audience that gets nothing (``percent``, ``goal_event``,
    ``window_days``; see :mod:`app.engines.funnels.experiments.campaign_holdout`)."""
    status: Mapped[str] = mapped_column(String(16))
    send_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    rate_per_minute: Mapped[int] = mapped_column(Integer)
    materialised_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    audience_size: Mapped[int] = mapped_column(Integer, default=0)
    audience_job_id: Mapped[int | None] = mapped_column(FK, nullable=True)
    """The bulk job taking a large audience's snapshot (``None``: taken at once)."""
    checkpoint: Mapped[int] = mapped_column(Integer, default=0)
    """Every recipient with ``seq <= checkpoint`` is settled (sent, skipped or failed)."""
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Recipient(Base):
    __tablename__ = "campaign_recipients"
    __table_args__ = (
        Index("ux_campaign_recipients_contact", "campaign_id", "contact_id", unique=True),
        RECIPIENTS.check(),
        Index(
            "ix_campaign_recipients_pending",
            "campaign_id",
            "seq",
            sqlite_where=text(RECIPIENTS.where(R_PENDING)),
            postgresql_where=text(RECIPIENTS.where(R_PENDING)),
        ),
    )

    campaign_id: Mapped[int] = mapped_column(
        FK, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    contact_id: Mapped[int] = mapped_column(FK, ForeignKey("contacts.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    """Why it was skipped (the consent gate's reason) or failed."""
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class CampaignEvent(Base):
    """A delivery report about one recipient (delivered, opened, clicked, bounced, …). The
    campaign's counters are counts of distinct recipients per kind over these rows."""

    __tablename__ = "campaign_events"
    __table_args__ = (
        Index(
            "ux_campaign_events_sender_id",
            "campaign_id",
            "external_id",
            unique=True,
            sqlite_where=text("external_id IS NOT NULL"),
            postgresql_where=text("external_id IS NOT NULL"),
        ),
        Index("ix_campaign_events_kind", "campaign_id", "kind", "seq"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(FK, ForeignKey("campaigns.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
