"""Tables of the actions that reach outside: each workspace's provider configuration, the results
of delivered effects (read back by the node that asked for them), the organisation's AI quota and
usage ledger (PL-4), and the cache of generated texts.
"""

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
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime

FK = BigId


class ProviderConfig(Base):
    """Which provider a workspace uses for one kind of outside action, and where it lives.

    Credentials are not here: they are workspace secrets (``funnels.<kind>.key``), encrypted at
    rest and never returned by the API."""

    __tablename__ = "funnel_providers"
    __table_args__ = (UniqueConstraint("workspace_id", "kind"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    """``sms``, ``push``, ``letter``, ``payments``, ``booking``, ``ai`` or ``http``."""
    shape: Mapped[str] = mapped_column(String(16))
    """The API's shape: ``json`` (generic), ``twilio``, ``stripe``, ``openai`` or ``guarded``."""
    base_url: Mapped[str] = mapped_column(String(500))
    options: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    """Non-secret settings of the shape (sender, model, success URL, limits…)."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class EffectResult(Base):
    """What a delivered effect produced (or why it failed), kept for the node that waits for it
    and so that a redelivery of a finished effect does not call the provider again."""

    __tablename__ = "funnel_effect_results"

    outbox_id: Mapped[int] = mapped_column(
        FK, ForeignKey("funnel_outbox.id", ondelete="CASCADE"), primary_key=True
    )
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    ok: Mapped[bool] = mapped_column(Boolean)
    result: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class AiQuota(Base):
    """An organisation's AI token quota for the current calendar month (PL-4).

    ``used_tokens`` is reserved with a conditional UPDATE before each call, so concurrent
    deliverers cannot take the organisation past its quota together."""

    __tablename__ = "funnel_ai_quotas"

    organisation_id: Mapped[int] = mapped_column(
        FK, ForeignKey("organisations.id", ondelete="CASCADE"), primary_key=True
    )
    quota_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """Tokens per month; ``None`` for no limit."""
    period_start: Mapped[datetime] = mapped_column(UTCDateTime)
    used_tokens: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AiUsage(Base):
    """One generation paid for (the ledger behind ``used_tokens``), or one refused for quota."""

    __tablename__ = "funnel_ai_usage"
    __table_args__ = (Index("ix_funnel_ai_usage_org_at", "organisation_id", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    organisation_id: Mapped[int] = mapped_column(
        FK, ForeignKey("organisations.id", ondelete="CASCADE")
    )
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    idempotency_key: Mapped[str] = mapped_column(String(200), unique=True)
    outcome: Mapped[str] = mapped_column(String(16))
    """``generated``, ``refused`` (the quota decision's reason is in ``detail``) or ``lost``: a
    call whose reply never arrived, counted at its reservation because the provider may have
    billed it."""
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    model: Mapped[str] = mapped_column(String(100), default="")
    detail: Mapped[str] = mapped_column(String(200), default="")
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class AiCacheEntry(Base):
    """A generated text under the hash of (creative, contact attributes used): a repeated send
    with the same inputs reads it instead of paying again."""

    __tablename__ = "funnel_ai_cache"
    __table_args__ = (UniqueConstraint("workspace_id", "cache_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))
    cache_key: Mapped[str] = mapped_column(String(80))
    text: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(100))
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
