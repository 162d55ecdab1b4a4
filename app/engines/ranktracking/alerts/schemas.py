"""API structs of alert rules, their deliveries and the e-mail report settings."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from app.schemas import Name, Schema, Url

AlertKind = Literal["enters_top", "leaves_top", "moves"]
Channel = Literal["email", "webhook"]
Device = Literal["desktop", "mobile"]
Period = Literal["weekly", "monthly"]
Address = Annotated[str, msgspec.Meta(max_length=254)]
Recipients = Annotated[list[Address], msgspec.Meta(max_length=20)]
Threshold = Annotated[int, msgspec.Meta(ge=1, le=100)]
Secret = Annotated[str, msgspec.Meta(min_length=16, max_length=200)]


class AlertRuleIn(Schema):
    """A rule: ``enters_top`` / ``leaves_top`` with ``threshold`` N (the top N), or ``moves`` by
    at least ``threshold`` places; delivered by ``email`` to ``recipients`` or by ``webhook`` to
    ``url``, signed with ``secret`` (write-only; an update without it keeps the stored one)."""

    name: Name
    kind: AlertKind
    threshold: Threshold
    device: Device | None = None
    """Only this device's measurements (default: both)."""
    channel: Channel = "email"
    recipients: Recipients = []
    url: Url | None = None
    secret: Secret | None = None
    enabled: bool = True


class AlertRuleOut(Schema):
    id: int
    schedule_id: int
    name: str
    kind: str
    threshold: int
    device: str | None
    channel: str
    recipients: list[str]
    url: str | None
    has_secret: bool
    enabled: bool
    created_at: datetime
    updated_at: datetime


class AlertRuleList(Schema):
    items: list[AlertRuleOut]


class AlertDeliveryOut(Schema):
    id: int
    rule_id: int
    request_id: int
    channel: str
    state: str
    """``pending``, ``sending``, ``sent`` or ``failed``."""
    attempts: int
    error: str | None
    matches: list[dict[str, Any]]
    """keyword, device, previous and current position of each keyword that fired."""
    created_at: datetime
    sent_at: datetime | None


class AlertDeliveryList(Schema):
    items: list[AlertDeliveryOut]


class ReportSettingsIn(Schema):
    """The schedule's e-mail report; ``recipients`` empty: its owner (or the workspace admins)."""

    period: Period
    recipients: Recipients = []
    enabled: bool = True


class ReportSettingsOut(Schema):
    schedule_id: int
    period: str | None
    recipients: list[str]
    enabled: bool
    next_due_at: datetime | None
    """When the next report is sent (the end of the period it covers)."""
