"""Tables of ingestion and trigger bookkeeping.

- ``funnel_inbound_events``: every event that arrives from outside (``api_event`` calls, hosted
  forms, the site snippet, tracking pixels and links, booking and payment webhooks, delivery
  reports) is written here first, in one insert, and the sender is answered. A job turns each one
  into a contact event afterwards (FN-13). The sender's event id is unique per workspace and
  source, so a retried webhook stores nothing new.
- ``funnel_forms``: hosted forms, addressed by an unguessable public id.
- ``funnel_trigger_fires``: one row per (funnel, trigger, contact, occurrence) for the time-based
  triggers, so a date or a schedule fires once per occurrence whatever the number of sweeps.
- ``funnel_segment_members``: who matched a ``segment_enter`` trigger's predicate at the last
  evaluation; a contact *entering* the segment is one that is not in it yet.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime

FK = BigId

SOURCES = ("api", "form", "site", "tracking", "booking", "payment", "delivery")


class InboundEvent(Base):
    __tablename__ = "funnel_inbound_events"
    __table_args__ = (
        Index(
            "ux_funnel_inbound_events_sender_id",
            "workspace_id",
            "source",
            "external_id",
            unique=True,
            sqlite_where=text("external_id IS NOT NULL"),
            postgresql_where=text("external_id IS NOT NULL"),
        ),
        Index(
            "ix_funnel_inbound_events_unprocessed",
            "id",
            sqlite_where=text("processed_at IS NULL"),
            postgresql_where=text("processed_at IS NULL"),
        ),
        Index("ix_funnel_inbound_events_workspace", "workspace_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    source: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(100))
    external_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """The sender's event id (idempotency key)."""
    payload: Mapped[dict[str, Any]] = mapped_column(Json)
    """Who (``contact``: ``id`` or ``email``), ``properties`` and ``occurred_at``."""
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    contact_id: Mapped[int | None] = mapped_column(FK, nullable=True)
    outcome: Mapped[str | None] = mapped_column(Text, nullable=True)
    """What processing did with it (``recorded``, ``duplicate``, or why it was dropped)."""


class Form(Base):
    __tablename__ = "funnel_forms"
    __table_args__ = (Index("ix_funnel_forms_workspace", "workspace_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    public_id: Mapped[str] = mapped_column(String(40), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    fields: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    """``[{"key", "label", "required"}]``; ``email`` is always asked."""
    add_tag: Mapped[str | None] = mapped_column(String(100), nullable=True)
    add_list: Mapped[str | None] = mapped_column(String(100), nullable=True)
    success_message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class TriggerFire(Base):
    __tablename__ = "funnel_trigger_fires"

    funnel_id: Mapped[int] = mapped_column(
        FK, ForeignKey("funnels.id", ondelete="CASCADE"), primary_key=True
    )
    trigger_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    contact_id: Mapped[int] = mapped_column(FK, primary_key=True)
    """0 for a schedule's own occurrence row."""
    occurrence: Mapped[str] = mapped_column(String(40), primary_key=True)
    fired_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SegmentMember(Base):
    __tablename__ = "funnel_segment_members"
    __table_args__ = (Index("ix_funnel_segment_members_contact", "contact_id"),)

    funnel_id: Mapped[int] = mapped_column(
        FK, ForeignKey("funnels.id", ondelete="CASCADE"), primary_key=True
    )
    trigger_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    contact_id: Mapped[int] = mapped_column(
        FK, ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True
    )
    since: Mapped[datetime] = mapped_column(UTCDateTime)


class ReportNonce(Base):
    """A one-time value (Mailgun's signature ``token``) a provider's signed delivery report
    carried, remembered until a request carrying it could no longer be accepted (its timestamp
    outside the tolerance): a captured request replayed within that window is refused."""

    __tablename__ = "funnel_report_nonces"
    __table_args__ = (
        Index("ux_funnel_report_nonces", "workspace_id", "provider", "nonce", unique=True),
        Index("ix_funnel_report_nonces_expires", "expires_at"),
        CheckConstraint("provider IN ('mailgun')", name="provider"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    provider: Mapped[str] = mapped_column(String(16))
    nonce: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
