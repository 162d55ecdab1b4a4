"""Alerts and e-mail reports of a schedule: its alert rules, each alert that fired (once per rule
and measured request), its report setting and each period's report.

Both e-mails' states are :mod:`.alerts.delivery_states`'s machines; the rows are written by
:mod:`.alerts.evaluate`, :mod:`.alerts.deliver` and :mod:`.alerts.report`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.ranktracking.alerts.delivery_states import ALERT_DELIVERIES as ALERT_DELIVERIES
from app.engines.ranktracking.alerts.delivery_states import DELIVERY_FAILED as DELIVERY_FAILED
from app.engines.ranktracking.alerts.delivery_states import DELIVERY_PENDING as DELIVERY_PENDING
from app.engines.ranktracking.alerts.delivery_states import DELIVERY_SENDING as DELIVERY_SENDING
from app.engines.ranktracking.alerts.delivery_states import DELIVERY_SENT as DELIVERY_SENT
from app.engines.ranktracking.alerts.delivery_states import REPORT_DELIVERIES as REPORT_DELIVERIES

# Alert rule kinds: a keyword enters or leaves the top N, or moves by at least K places.
ENTERS_TOP = "enters_top"
LEAVES_TOP = "leaves_top"
MOVES = "moves"
ALERT_KINDS = (ENTERS_TOP, LEAVES_TOP, MOVES)


class AlertRule(Base):
    """A rule of a schedule: which movements of its keywords someone wants to hear about, and
    how (an e-mail to its recipients, or a signed webhook)."""

    __tablename__ = "rt_alert_rules"
    __table_args__ = (Index("ix_rt_alert_rules_schedule", "schedule_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    threshold: Mapped[int] = mapped_column(sa.Integer)
    """N of the top N, or K places of a move."""
    device: Mapped[str | None] = mapped_column(String(8), nullable=True)
    """Only this device's measurements; None: both."""
    channel: Mapped[str] = mapped_column(String(10))
    """``email`` or ``webhook``."""
    recipients: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    url: Mapped[str | None] = mapped_column(Text, nullable=True)
    sealed_secret: Mapped[str | None] = mapped_column(Text, nullable=True)
    """The webhook's signing secret, encrypted with the server's secret box (write-only)."""
    enabled: Mapped[bool] = mapped_column(sa.Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AlertDelivery(Base):
    """One alert: a rule that fired for one measured request. The unique key (rule, request) is
    what makes an alert happen once per run, however often the evaluation runs."""

    __tablename__ = "rt_alert_deliveries"
    __table_args__ = (
        UniqueConstraint("rule_id", "request_id"),
        Index("ix_rt_alert_deliveries_request", "request_id"),
        ALERT_DELIVERIES.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    rule_id: Mapped[int] = mapped_column(BigId, ForeignKey("rt_alert_rules.id", ondelete="CASCADE"))
    request_id: Mapped[int] = mapped_column(BigId, ForeignKey("rt_requests.id", ondelete="CASCADE"))
    channel: Mapped[str] = mapped_column(String(10))
    matches: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    """The keywords that fired: keyword, device, previous and current position."""
    state: Mapped[str] = mapped_column(String(10))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """While ``sending``: the sender's claim; past it another attempt may take the row over."""
    attempts: Mapped[int] = mapped_column(sa.Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ReportSetting(Base):
    """A schedule's e-mail report: weekly or monthly, to its recipients (or its owner)."""

    __tablename__ = "rt_report_settings"
    __table_args__ = (
        Index(
            "ix_rt_report_settings_due",
            "next_due_at",
            sqlite_where=text("enabled"),
            postgresql_where=text("enabled"),
        ),
    )

    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE"), primary_key=True
    )
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    period: Mapped[str] = mapped_column(String(10))
    """``weekly`` (Monday to Monday, UTC) or ``monthly`` (calendar months, UTC)."""
    recipients: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    """None: the schedule's owner (or the workspace's admins)."""
    enabled: Mapped[bool] = mapped_column(sa.Boolean, default=True)
    next_due_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """The end of the period the next report covers; the report sweep claims it from then."""
    last_claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ReportDelivery(Base):
    """One period's report of a schedule; unique per (schedule, period start)."""

    __tablename__ = "rt_report_deliveries"
    __table_args__ = (UniqueConstraint("schedule_id", "period_start"), REPORT_DELIVERIES.check())

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    schedule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    period: Mapped[str] = mapped_column(String(10))
    period_start: Mapped[datetime] = mapped_column(UTCDateTime)
    period_end: Mapped[datetime] = mapped_column(UTCDateTime)
    state: Mapped[str] = mapped_column(String(10))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
