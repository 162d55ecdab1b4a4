"""Position tracking tables: keyword lists, schedules, requests and their child runs, per-keyword
results, the append-only money ledger with its derived balance row, and the activity feed.

Every table is prefixed ``rt_``. Money is integer micro-euros (1 EUR = 1,000,000, see
:mod:`.amounts`) except the user-entered monthly cap, in whole cents; provider-reported costs (USD)
are ``Numeric`` and only recorded and reconciled, never charged.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.ranktracking.reservation_states import RES_HELD as RES_HELD
from app.engines.ranktracking.reservation_states import RES_NONE as RES_NONE
from app.engines.ranktracking.reservation_states import RES_RELEASED as RES_RELEASED
from app.engines.ranktracking.reservation_states import RES_SETTLED as RES_SETTLED
from app.engines.ranktracking.reservation_states import RESERVATIONS as RESERVATIONS
from app.engines.ranktracking.result_states import NO_DATA as NO_DATA
from app.engines.ranktracking.result_states import PENDING as PENDING
from app.engines.ranktracking.result_states import RESULTS as RESULTS
from app.engines.ranktracking.result_states import RETRIEVED as RETRIEVED
from app.engines.ranktracking.result_states import TASK_FAILED as TASK_FAILED
from app.engines.ranktracking.run_states import ACTIVE_RUN_STATUSES as ACTIVE_RUN_STATUSES
from app.engines.ranktracking.run_states import DISPATCHING as DISPATCHING
from app.engines.ranktracking.run_states import FAILED as FAILED
from app.engines.ranktracking.run_states import PARTIAL as PARTIAL
from app.engines.ranktracking.run_states import RUNNING as RUNNING
from app.engines.ranktracking.run_states import RUNS as RUNS
from app.engines.ranktracking.run_states import SKIPPED_BALANCE as SKIPPED_BALANCE
from app.engines.ranktracking.run_states import SKIPPED_DISPATCH as SKIPPED_DISPATCH
from app.engines.ranktracking.run_states import SUCCEEDED as SUCCEEDED
from app.engines.ranktracking.run_states import TERMINAL_RUN_STATUSES as TERMINAL_RUN_STATUSES
from app.engines.ranktracking.schedules.states import ACTIVE as ACTIVE
from app.engines.ranktracking.schedules.states import ARCHIVED as ARCHIVED
from app.engines.ranktracking.schedules.states import PAUSED_BALANCE as PAUSED_BALANCE
from app.engines.ranktracking.schedules.states import PAUSED_USER as PAUSED_USER
from app.engines.ranktracking.schedules.states import SCHEDULE_STATUSES as SCHEDULE_STATUSES
from app.engines.ranktracking.schedules.states import SCHEDULES as SCHEDULES

FK_ID = BigId

CANCELLED = "cancelled"
"""The error code of a run closed by a pause or an end (RT-28, RT-29); not a status."""

# Ledger entry kinds (RT-38).
TOPUP = "topup"
RESERVATION = "reservation"
SETTLEMENT = "settlement"
RELEASE = "release"
RECONCILIATION = "reconcile"
"""The provider billed more than the settlement charged (RT-37): recorded, never charged, so it
does not move the balance; ``amount_micros`` is the gap in EUR."""
LEDGER_KINDS = (TOPUP, RESERVATION, SETTLEMENT, RELEASE, RECONCILIATION)


class KeywordList(Base):
    __tablename__ = "rt_keyword_lists"
    __table_args__ = (UniqueConstraint("workspace_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ListKeyword(Base):
    """One normalised keyword of a list (unique per list)."""

    __tablename__ = "rt_list_keywords"
    __table_args__ = (UniqueConstraint("list_id", "keyword"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    list_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("rt_keyword_lists.id", ondelete="CASCADE")
    )
    keyword: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Schedule(Base):
    """A recurring measurement contract (RT-1). It configures requests; it proves none."""

    __tablename__ = "rt_schedules"
    __table_args__ = (
        # RT-15: one live list-linked schedule per duplicate key; archived rows never block.
        Index(
            "uq_rt_schedules_dedup",
            "workspace_id",
            "dedup_key",
            unique=True,
            sqlite_where=text(
                f"{SCHEDULES.where(ARCHIVED, negate=True)} AND dedup_key IS NOT NULL"
            ),
            postgresql_where=text(
                f"{SCHEDULES.where(ARCHIVED, negate=True)} AND dedup_key IS NOT NULL"
            ),
        ),
        # The dispatcher's query: due active schedules, oldest first.
        Index(
            "ix_rt_schedules_due",
            "next_due_at",
            sqlite_where=text(SCHEDULES.where(ACTIVE)),
            postgresql_where=text(SCHEDULES.where(ACTIVE)),
        ),
        Index("ix_rt_schedules_workspace_status", "workspace_id", "status"),
        CheckConstraint("monthly_cap_cents IS NULL OR monthly_cap_cents >= 500", name="cap_min"),
        SCHEDULES.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    organisation_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("organisations.id", ondelete="CASCADE")
    )
    owner_user_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    name: Mapped[str] = mapped_column(String(200))
    list_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("rt_keyword_lists.id"), nullable=True, index=True
    )
    keywords: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    """The direct selection (normalised, de-duplicated); None for a list-linked schedule."""
    data_type: Mapped[str] = mapped_column(String(16))
    frequency: Mapped[str] = mapped_column(String(16))
    depth: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    location_code: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    language_code: Mapped[str | None] = mapped_column(String(8), nullable=True)
    domain: Mapped[str | None] = mapped_column(String(253), nullable=True)
    """SERP: the site whose organic position is measured."""
    competitors: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    """SERP: up to 5 other domains read from the same result pages (no extra provider call)."""
    target_urls: Mapped[dict[str, str] | None] = mapped_column(Json, nullable=True)
    """SERP: keyword → the page of the domain that should rank for it."""
    devices: Mapped[str | None] = mapped_column(String(20), nullable=True)
    """``desktop``, ``mobile`` or ``desktop,mobile`` (canonical order)."""
    packages: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    monthly_cap_cents: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    dedup_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    anchor_at: Mapped[datetime] = mapped_column(UTCDateTime)
    next_due_at: Mapped[datetime] = mapped_column(UTCDateTime)
    retrying: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    """The next due time is a one-hour retry after a dispatch that did not reach the worker."""
    consecutive_blocks: Mapped[int] = mapped_column(sa.Integer, default=0)
    consecutive_failures: Mapped[int] = mapped_column(sa.Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    @property
    def device_list(self) -> list[str]:
        return self.devices.split(",") if self.devices else []


class Request(Base):
    """One admission attempt: a logical group of child runs (one per device, or one for keyword
    data). Skipped attempts are requests too, so every due time leaves a row."""

    __tablename__ = "rt_requests"
    __table_args__ = (Index("ix_rt_requests_schedule", "schedule_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    schedule_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    trigger: Mapped[str] = mapped_column(String(16))
    """``recurring``, ``manual``, ``baseline``."""
    queue: Mapped[str] = mapped_column(String(16))
    """``standard`` or ``priority``."""
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Run(Base):
    """A child run: one device's (or the keyword-data) measurement of one request (RT-13, RT-33)."""

    __tablename__ = "rt_runs"
    __table_args__ = (
        Index("ix_rt_runs_request", "request_id"),
        Index("ix_rt_runs_schedule", "schedule_id", "id"),
        Index(
            "ix_rt_runs_active",
            "updated_at",
            sqlite_where=text(RUNS.where(*ACTIVE_RUN_STATUSES)),
            postgresql_where=text(RUNS.where(*ACTIVE_RUN_STATUSES)),
        ),
        Index(
            "ix_rt_runs_held",
            "schedule_id",
            sqlite_where=text(RESERVATIONS.where(RES_HELD)),
            postgresql_where=text(RESERVATIONS.where(RES_HELD)),
        ),
        RUNS.check(),
        RESERVATIONS.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    schedule_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    request_id: Mapped[int] = mapped_column(FK_ID, ForeignKey("rt_requests.id", ondelete="CASCADE"))
    data_type: Mapped[str] = mapped_column(String(16))
    device: Mapped[str | None] = mapped_column(String(8), nullable=True)
    queue: Mapped[str] = mapped_column(String(16))
    depth: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    location_code: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    language_code: Mapped[str | None] = mapped_column(String(8), nullable=True)
    domain: Mapped[str | None] = mapped_column(String(253), nullable=True)
    competitors: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    """The schedule's competitor domains when the run was admitted."""
    packages: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    keywords: Mapped[list[str]] = mapped_column(Json)
    """The members resolved for this request (immutable; ``requested`` is their count)."""
    status: Mapped[str] = mapped_column(String(20))
    error_code: Mapped[str | None] = mapped_column(String(40), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    requested: Mapped[int] = mapped_column(sa.Integer, default=0)
    retrieved: Mapped[int] = mapped_column(sa.Integer, default=0)
    no_data: Mapped[int] = mapped_column(sa.Integer, default=0)
    reserved_micros: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    settled_micros: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    reservation_state: Mapped[str] = mapped_column(String(10), default=RES_NONE)
    provider_cost: Mapped[Decimal | None] = mapped_column(sa.Numeric(14, 6), nullable=True)
    polls: Mapped[int] = mapped_column(sa.Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Result(Base):
    """One keyword of one child run: its provider task and what came back (RT-14)."""

    __tablename__ = "rt_results"
    __table_args__ = (
        UniqueConstraint("run_id", "keyword"),
        Index("ix_rt_results_task", "task_id"),
        Index("ix_rt_results_history", "schedule_id", "keyword", "id"),
        # The positions table's best position per keyword and device, and whether a run it
        # shows measured them, read from the index alone.
        Index("ix_rt_results_keys", "schedule_id", "keyword", "device", "position", "run_id"),
        Index(
            "ix_rt_results_ready",
            "ready_at",
            sqlite_where=text(f"{RESULTS.where(PENDING)} AND ready_at IS NOT NULL"),
            postgresql_where=text(f"{RESULTS.where(PENDING)} AND ready_at IS NOT NULL"),
        ),
        RESULTS.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(FK_ID, ForeignKey("rt_runs.id", ondelete="CASCADE"))
    schedule_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("rt_schedules.id", ondelete="CASCADE")
    )
    keyword: Mapped[str] = mapped_column(String(200))
    device: Mapped[str | None] = mapped_column(String(8), nullable=True)
    task_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    state: Mapped[str] = mapped_column(String(12))
    position: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    """Organic rank; None when not within the requested depth (or no data). Never 0."""
    url: Mapped[str | None] = mapped_column(Text, nullable=True)
    features: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    """The SERP feature types on the page, as the provider's result items name them."""
    owned_features: Mapped[list[str] | None] = mapped_column(Json, nullable=True)
    """The features whose item links to the tracked domain (a featured snippet of the site)."""
    competitors: Mapped[dict[str, int | None] | None] = mapped_column(Json, nullable=True)
    """Each competitor domain's organic position on the same page (None: not within the depth)."""
    data: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    """Keyword data values (search volume, CPC, competition, monthly searches)."""
    error_code: Mapped[str | None] = mapped_column(String(40), nullable=True)
    fetched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    ready_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """When ``tasks_ready`` listed the task (it lists a finished task only once): from then on the
    poller fetches it until the fetch succeeds, whatever later listings say."""
    fetch_attempts: Mapped[int] = mapped_column(sa.Integer, default=0, server_default="0")
    """``task_get`` calls for this task that failed or were unreadable (they are free; retried)."""


class Balance(Base):
    """The organisation's balance, derived from the ledger and kept beside it in the same
    transaction. It is the row admissions lock; the check keeps it from ever going negative."""

    __tablename__ = "rt_balances"
    __table_args__ = (
        CheckConstraint(
            "credits_micros - settled_micros - reserved_micros >= 0", name="not_negative"
        ),
    )

    organisation_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("organisations.id", ondelete="CASCADE"), primary_key=True
    )
    credits_micros: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    settled_micros: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    reserved_micros: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    @property
    def available_micros(self) -> int:
        return self.credits_micros - self.settled_micros - self.reserved_micros


class LedgerEntry(Base):
    """An append-only money entry (RT-38). Settlements and releases point at their reservation;
    the unique index lets a reservation be settled at most once and released at most once."""

    __tablename__ = "rt_ledger"
    __table_args__ = (
        UniqueConstraint("reservation_id", "kind"),
        Index("ix_rt_ledger_org", "organisation_id", "id"),
        Index("ix_rt_ledger_run", "run_id"),
        Index("ix_rt_ledger_schedule", "schedule_id", "kind", "created_at"),
        CheckConstraint("amount_micros >= 0", name="amount_positive"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    organisation_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("organisations.id", ondelete="CASCADE")
    )
    workspace_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("workspaces.id", ondelete="SET NULL"), nullable=True
    )
    schedule_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("rt_schedules.id", ondelete="SET NULL"), nullable=True
    )
    run_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("rt_runs.id", ondelete="SET NULL"), nullable=True
    )
    reservation_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("rt_ledger.id"), nullable=True
    )
    kind: Mapped[str] = mapped_column(String(12))
    amount_micros: Mapped[int] = mapped_column(sa.BigInteger)
    provider_cost: Mapped[Decimal | None] = mapped_column(sa.Numeric(14, 6), nullable=True)
    note: Mapped[str] = mapped_column(String(300), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Activity(Base):
    """The workspace's activity feed (RT-39): what a person looks for before retrying."""

    __tablename__ = "rt_activity"
    __table_args__ = (Index("ix_rt_activity_workspace", "workspace_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        FK_ID, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    schedule_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("rt_schedules.id", ondelete="CASCADE"), nullable=True
    )
    run_id: Mapped[int | None] = mapped_column(
        FK_ID, ForeignKey("rt_runs.id", ondelete="CASCADE"), nullable=True
    )
    kind: Mapped[str] = mapped_column(String(40))
    code: Mapped[str | None] = mapped_column(String(40), nullable=True)
    message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class PollerState(Base):
    """The shared poller's recent ``tasks_ready`` calls per endpoint, so that every process that
    runs a poll tick stays within the provider's per-minute limit (ticks never overlap)."""

    __tablename__ = "rt_poller_state"

    endpoint: Mapped[str] = mapped_column(String(32), primary_key=True)
    calls: Mapped[list[str]] = mapped_column(Json, default=list)
    """ISO times of the calls made within the last minute."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


from app.engines.ranktracking.alert_models import (  # noqa: E402, F401 - tables
    AlertDelivery,
    AlertRule,
    ReportDelivery,
    ReportSetting,
)
from app.engines.ranktracking.explain_models import Annotation, SerpSnapshot  # noqa: E402, F401 - tables
from app.engines.ranktracking.local.models import GeoGrid, GeoGridCell  # noqa: E402, F401 - tables
from app.engines.ranktracking.location_models import ProviderLocation  # noqa: E402, F401 - a table
from app.engines.ranktracking.share_models import ReportLink  # noqa: E402, F401 - a table
from app.engines.ranktracking.tag_models import KeywordTag  # noqa: E402, F401 - a table
