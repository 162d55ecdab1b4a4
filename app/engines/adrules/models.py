"""Ad rules tables: ad accounts, rules, their tasks and accounts, and one batch record per dispatch
and account.

The due-rule index is partial (``status IN ('active', 'shadow')``), so the 10-second sweep reads only rules that
can run, however many drafts and archived rules a workspace keeps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.adrules.batch_states import BATCH_COMPLETED as BATCH_COMPLETED
from app.engines.adrules.batch_states import BATCH_DEFERRED as BATCH_DEFERRED
from app.engines.adrules.batch_states import BATCH_EMPTY as BATCH_EMPTY
from app.engines.adrules.batch_states import BATCH_FAILED as BATCH_FAILED
from app.engines.adrules.batch_states import BATCH_QUEUED as BATCH_QUEUED
from app.engines.adrules.batch_states import BATCH_RUNNING as BATCH_RUNNING
from app.engines.adrules.batch_states import BATCH_SKIPPED as BATCH_SKIPPED
from app.engines.adrules.batch_states import BATCH_STATUSES as BATCH_STATUSES
from app.engines.adrules.batch_states import BATCHES as BATCHES
from app.engines.adrules.rule_states import RULES as RULES
from app.engines.adrules.rule_states import SCHEDULED_STATUSES as SCHEDULED_STATUSES

META_TOKEN_SECRET = "meta_access_token"  # noqa: S105 - the secret's name, not a secret
"""Name of the workspace secret holding the Meta access token (encrypted at rest)."""


def _fk(target: str) -> Any:
    return ForeignKey(target, ondelete="CASCADE")


class AdAccount(Base):
    """A Meta ad account the workspace's token can reach. Stored inactive until a person activates
    it (spec AR-2, AR-20)."""

    __tablename__ = "adrules_ad_accounts"
    __table_args__ = (
        UniqueConstraint("workspace_id", "meta_id", name="uq_adrules_ad_accounts_workspace_meta"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(BigId, _fk("workspaces.id"), index=True)
    meta_id: Mapped[str] = mapped_column(String(40))
    """``act_<id>``."""
    name: Mapped[str] = mapped_column(String(200))
    currency: Mapped[str] = mapped_column(String(3))
    timezone_name: Mapped[str] = mapped_column(String(64))
    account_status: Mapped[int] = mapped_column(Integer)
    """Meta's ``account_status`` (1 active, 2 disabled, 3 unsettled, …)."""
    active: Mapped[bool] = mapped_column(Boolean, default=False)
    discovered_at: Mapped[datetime] = mapped_column(UTCDateTime)
    activated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Rule(Base):
    """A rule. Its schedule and pre-filters are stored as validated JSON documents; the columns the
    sweep filters on are kept beside them."""

    __tablename__ = "adrules_rules"
    __table_args__ = (
        Index(
            "ix_adrules_rules_due",
            "next_execution_at",
            sqlite_where=text(RULES.where(*SCHEDULED_STATUSES)),
            postgresql_where=text(RULES.where(*SCHEDULED_STATUSES)),
        ),
        RULES.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(BigId, _fk("workspaces.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    level: Mapped[str] = mapped_column(String(16), default="campaign", server_default="campaign")
    """``campaign``, ``adset`` or ``ad``: the objects the rule reads and acts on."""
    prefilters: Mapped[dict[str, Any]] = mapped_column(Json)
    schedule: Mapped[dict[str, Any]] = mapped_column(Json)
    next_execution_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """When the sweep takes the rule next (spec AR-5); None when no run is left (window over)."""
    window_starts_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """Local midnight of the window's start date, in UTC (None: open start)."""
    window_ends_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """Local midnight after the window's end date, in UTC (None: open end)."""
    approval: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    """``{"required": true, "window_hours": n}`` when changes wait for approval (AR-28)."""
    last_dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_batch_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    attribution_windows: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    """Meta's ``action_attribution_windows`` the rule reads conversions with (spec AR-41); None:
    each ad set's own attribution setting (Meta's unified setting)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RuleAccount(Base):
    """An ad account a rule covers."""

    __tablename__ = "adrules_rule_accounts"

    rule_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("adrules_rules.id", ondelete="CASCADE"), primary_key=True
    )
    ad_account_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("adrules_ad_accounts.id", ondelete="CASCADE"), primary_key=True
    )


class Task(Base):
    """One task of a rule: conditions, group operator, action and cooldown (a JSON document).

    Removed tasks are kept with ``archived_at`` set, so records and cooldowns that point at them
    stay readable.
    """

    __tablename__ = "adrules_tasks"
    __table_args__ = (Index("ix_adrules_tasks_rule", "rule_id", "position"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    rule_id: Mapped[int] = mapped_column(BigId, _fk("adrules_rules.id"))
    workspace_id: Mapped[int] = mapped_column(BigId, _fk("workspaces.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    document: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Batch(Base):
    """One dispatch of one rule on one ad account (spec AR-18): written by the dispatcher, its
    counts and final status filled in by the worker."""

    __tablename__ = "adrules_batches"
    __table_args__ = (
        UniqueConstraint("batch_id", "ad_account_id", name="uq_adrules_batches_batch_account"),
        Index("ix_adrules_batches_rule", "rule_id", "created_at"),
        Index("ix_adrules_batches_workspace", "workspace_id", "created_at"),
        # The next tick's first work: the few deferred accounts, oldest first.
        Index(
            "ix_adrules_batches_deferred",
            "tick_at",
            "id",
            sqlite_where=text(BATCHES.where(BATCH_DEFERRED)),
            postgresql_where=text(BATCHES.where(BATCH_DEFERRED)),
        ),
        BATCHES.check(),
        CheckConstraint("fetch_waited_ms >= 0", name="fetch_waited_ms"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    batch_id: Mapped[str] = mapped_column(String(32))
    """Shared by every account of one dispatch; the account job's execution records carry it too."""
    workspace_id: Mapped[int] = mapped_column(BigId, _fk("workspaces.id"))
    rule_id: Mapped[int] = mapped_column(BigId, _fk("adrules_rules.id"))
    ad_account_id: Mapped[int] = mapped_column(BigId, _fk("adrules_ad_accounts.id"))
    account_meta_id: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(16))
    entities: Mapped[int] = mapped_column(Integer, default=0)
    """Campaigns fetched for this account (after the pre-filters)."""
    pages: Mapped[int] = mapped_column(Integer, default=0)
    fetch_attempts: Mapped[int] = mapped_column(Integer, default=0)
    fetch_waited_ms: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    """Of a deferred account: how much of its fetch deadline its calls used so far (the next
    tick gives it only the rest)."""
    executed: Mapped[int] = mapped_column(Integer, default=0)
    not_executed: Mapped[int] = mapped_column(Integer, default=0)
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    errors: Mapped[int] = mapped_column(Integer, default=0)
    shadow: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """A shadow rule's run: its records say what would have been done; nothing was written."""
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    timezone: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The IANA zone the run evaluated in (spec AR-44): clock conditions, "today" and ``{date}``."""
    tick_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """The sweep tick that dispatched it."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class StopSwitch(Base):
    """A runtime stop of every automated ad action (spec AR-23), set by a person: for a whole
    organisation (``workspace_id`` None) or for one workspace. The row's presence is the stop;
    clearing it deletes the row. ``scope_key`` (``org:<id>`` / ``ws:<id>``) keeps one per scope."""

    __tablename__ = "adrules_stops"
    __table_args__ = (
        UniqueConstraint("scope_key", name="uq_adrules_stops_scope_key"),
        Index("ix_adrules_stops_organisation", "organisation_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    scope_key: Mapped[str] = mapped_column(String(40))
    organisation_id: Mapped[int] = mapped_column(BigId, _fk("organisations.id"))
    workspace_id: Mapped[int | None] = mapped_column(BigId, _fk("workspaces.id"), nullable=True)
    reason: Mapped[str] = mapped_column(String(500))
    stopped_by: Mapped[str] = mapped_column(String(200))
    stopped_at: Mapped[datetime] = mapped_column(UTCDateTime)
