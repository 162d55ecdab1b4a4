"""Tables of the Funnels engine: contacts and what describes them, funnels and their immutable
versions, runs and their steps, the outbox of side effects and the delivery record.

A funnel is a graph, a run is a row, a wait is a duration: a waiting run is one row with a
``wake_at``; nothing downstream is created ahead of time.
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
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.funnels.outbox.states import OUTBOX as OUTBOX
from app.engines.funnels.outbox.states import OUTBOX_CANCELLED as OUTBOX_CANCELLED
from app.engines.funnels.outbox.states import OUTBOX_FAILED as OUTBOX_FAILED
from app.engines.funnels.outbox.states import OUTBOX_PENDING as OUTBOX_PENDING
from app.engines.funnels.outbox.states import OUTBOX_SENT as OUTBOX_SENT
from app.engines.funnels.outbox.states import OUTBOX_SKIPPED as OUTBOX_SKIPPED
from app.engines.funnels.runs.states import RUN_ACTIVE as RUN_ACTIVE
from app.engines.funnels.runs.states import RUN_CANCELLED as RUN_CANCELLED
from app.engines.funnels.runs.states import RUN_COMPLETED as RUN_COMPLETED
from app.engines.funnels.runs.states import RUN_EXITED as RUN_EXITED
from app.engines.funnels.runs.states import RUN_FAILED as RUN_FAILED
from app.engines.funnels.runs.states import RUN_STATUSES as RUN_STATUSES
from app.engines.funnels.runs.states import RUNS as RUNS

FK = BigId


def _ws() -> Mapped[int]:
    return mapped_column(FK, ForeignKey("workspaces.id", ondelete="CASCADE"))


class Contact(Base):
    """A person. Deleting one erases its personal data and ends everything addressed to it; the
    row stays (``deleted_at``) so runs and delivery records keep their history."""

    __tablename__ = "contacts"
    __table_args__ = (
        Index(
            "ux_contacts_workspace_email",
            "workspace_id",
            "email",
            unique=True,
            sqlite_where=text("deleted_at IS NULL AND email IS NOT NULL"),
            postgresql_where=text("deleted_at IS NULL AND email IS NOT NULL"),
        ),
        Index("ix_contacts_workspace_id", "workspace_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    email: Mapped[str | None] = mapped_column(String(320), nullable=True)
    phone: Mapped[str | None] = mapped_column(String(40), nullable=True)
    first_name: Mapped[str] = mapped_column(String(200), default="")
    last_name: Mapped[str] = mapped_column(String(200), default="")
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    fields: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    """Custom field values by key, typed by the workspace's field definitions."""
    consent: Mapped[dict[str, str]] = mapped_column(Json, default=dict)
    """Per channel: ``granted`` or ``withdrawn`` (absent: not asked)."""
    suppressed: Mapped[dict[str, str]] = mapped_column(Json, default=dict)
    """Per channel: why nothing may be sent there (unsubscribed, bounced, complained)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class FieldDefinition(Base):
    """A typed custom field of a workspace's contacts."""

    __tablename__ = "contact_fields"
    __table_args__ = (UniqueConstraint("workspace_id", "key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    key: Mapped[str] = mapped_column(String(64))
    type: Mapped[str] = mapped_column(String(16))
    label: Mapped[str] = mapped_column(String(200), default="")


class Tag(Base):
    __tablename__ = "tags"
    __table_args__ = (UniqueConstraint("workspace_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    name: Mapped[str] = mapped_column(String(100))


class ContactTag(Base):
    __tablename__ = "contact_tags"

    contact_id: Mapped[int] = mapped_column(
        FK, ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True
    )
    tag_id: Mapped[int] = mapped_column(
        FK, ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ContactList(Base):
    __tablename__ = "contact_lists"
    __table_args__ = (UniqueConstraint("workspace_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    name: Mapped[str] = mapped_column(String(100))


class ListMember(Base):
    __tablename__ = "list_members"

    list_id: Mapped[int] = mapped_column(
        FK, ForeignKey("contact_lists.id", ondelete="CASCADE"), primary_key=True
    )
    contact_id: Mapped[int] = mapped_column(
        FK, ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ContactEvent(Base):
    """Something that happened to or was done by a contact. Stored first, matched to funnels
    afterwards (``matched_at``), off the request path."""

    __tablename__ = "contact_events"
    __table_args__ = (
        Index(
            "ux_contact_events_source",
            "workspace_id",
            "source",
            "external_id",
            unique=True,
            sqlite_where=text("external_id IS NOT NULL"),
            postgresql_where=text("external_id IS NOT NULL"),
        ),
        Index("ix_contact_events_contact", "contact_id", "name", "occurred_at"),
        Index(
            "ix_contact_events_unmatched",
            "id",
            sqlite_where=text("matched_at IS NULL"),
            postgresql_where=text("matched_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    contact_id: Mapped[int] = mapped_column(FK, ForeignKey("contacts.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    source: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    properties: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    matched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Funnel(Base):
    """A funnel and its editable draft. Published versions live in :class:`FunnelVersion`."""

    __tablename__ = "funnels"
    __table_args__ = (Index("ix_funnels_workspace_id", "workspace_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    name: Mapped[str] = mapped_column(String(200))
    draft: Mapped[dict[str, Any]] = mapped_column(Json)
    """The draft definition (graph, triggers, entry predicate, settings), editable at will."""
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    """When false, triggers start no new runs (runs in flight continue)."""
    current_version_id: Mapped[int | None] = mapped_column(FK, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class FunnelVersion(Base):
    """An immutable published definition. Runs are pinned to one."""

    __tablename__ = "funnel_versions"
    __table_args__ = (UniqueConstraint("funnel_id", "number"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    funnel_id: Mapped[int] = mapped_column(FK, ForeignKey("funnels.id", ondelete="CASCADE"))
    workspace_id: Mapped[int] = _ws()
    number: Mapped[int] = mapped_column(Integer)
    definition: Mapped[dict[str, Any]] = mapped_column(Json)
    reentry: Mapped[bool] = mapped_column(Boolean, default=False)
    published_at: Mapped[datetime] = mapped_column(UTCDateTime)
    published_by: Mapped[int | None] = mapped_column(FK, nullable=True)


class Run(Base):
    """One contact walking one funnel version."""

    __tablename__ = "funnel_runs"
    __table_args__ = (
        # FN-3: one run per contact per funnel, unless the funnel is open to re-entry ...
        Index(
            "ux_funnel_runs_once",
            "funnel_id",
            "contact_id",
            unique=True,
            sqlite_where=text("reentry = 0"),
            postgresql_where=text("reentry = false"),
        ),
        # ... and then still one *active* run per contact per funnel.
        Index(
            "ux_funnel_runs_active",
            "funnel_id",
            "contact_id",
            unique=True,
            sqlite_where=text(RUNS.where(RUN_ACTIVE)),
            postgresql_where=text(RUNS.where(RUN_ACTIVE)),
        ),
        # FN-5 / scale: only leasable rows are indexed, so leasing cost does not grow with the
        # number of finished runs.
        Index(
            "ix_funnel_runs_due",
            "wake_at",
            sqlite_where=text(RUNS.where(RUN_ACTIVE)),
            postgresql_where=text(RUNS.where(RUN_ACTIVE)),
        ),
        Index("ix_funnel_runs_contact", "contact_id"),
        Index("ix_funnel_runs_funnel_status", "funnel_id", "status"),
        Index("ix_funnel_runs_version", "version_id"),
        RUNS.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    funnel_id: Mapped[int] = mapped_column(FK, ForeignKey("funnels.id", ondelete="CASCADE"))
    version_id: Mapped[int] = mapped_column(
        FK, ForeignKey("funnel_versions.id", ondelete="CASCADE")
    )
    contact_id: Mapped[int] = mapped_column(FK, ForeignKey("contacts.id", ondelete="CASCADE"))
    reentry: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16))
    current_node: Mapped[str] = mapped_column(String(64))
    wake_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """When the run is next due. While leased it holds the lease expiry, so a run whose worker
    died becomes due again by itself (FN-9)."""
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    context: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    waiting_event: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """Name of the event that ends the current wait early, if any."""
    woken_by: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """Set when that event arrived (the wait then takes its event branch)."""
    step_count: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    entered_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    exit_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Step(Base):
    """One node executed for one run: what it decided and what it produced (FN-6)."""

    __tablename__ = "funnel_steps"
    __table_args__ = (Index("ix_funnel_steps_run", "run_id", "seq"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[int] = mapped_column(FK, ForeignKey("funnel_runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    node_id: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(32))
    decision: Mapped[str] = mapped_column(String(200), default="")
    output: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class OutboxEffect(Base):
    """An external side effect written in the same transaction as the run's advancement and
    delivered after commit (FN-7). ``idempotency_key`` is unique: re-executing a node cannot
    write a second effect, and every provider call carries the key."""

    __tablename__ = "funnel_outbox"
    __table_args__ = (
        Index(
            "ix_funnel_outbox_due",
            "next_attempt_at",
            sqlite_where=text(OUTBOX.where(OUTBOX_PENDING)),
            postgresql_where=text(OUTBOX.where(OUTBOX_PENDING)),
        ),
        Index("ix_funnel_outbox_run", "run_id"),
        Index("ix_funnel_outbox_contact", "contact_id", "status"),
        OUTBOX.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    run_id: Mapped[int | None] = mapped_column(
        FK, ForeignKey("funnel_runs.id", ondelete="SET NULL"), nullable=True
    )
    contact_id: Mapped[int] = mapped_column(FK, ForeignKey("contacts.id", ondelete="CASCADE"))
    node_id: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str] = mapped_column(String(32))
    idempotency_key: Mapped[str] = mapped_column(String(200), unique=True)
    payload: Mapped[dict[str, Any]] = mapped_column(Json)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """Not before this time (quiet hours, retry backoff); while leased, the lease expiry."""
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class DeliveryEvent(Base):
    """What happened to one effect: sent, deferred, failed, suppressed, cancelled, opened…"""

    __tablename__ = "delivery_events"
    __table_args__ = (
        Index("ix_delivery_events_outbox", "outbox_id"),
        Index("ix_delivery_events_contact", "contact_id", "at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = _ws()
    outbox_id: Mapped[int] = mapped_column(FK, ForeignKey("funnel_outbox.id", ondelete="CASCADE"))
    contact_id: Mapped[int] = mapped_column(FK, ForeignKey("contacts.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class ThrottleWindow(Base):
    """How many runs passed a throttle in one window (FN-19)."""

    __tablename__ = "funnel_throttle"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    used: Mapped[int] = mapped_column(Integer, default=0)


# Ingestion, trigger bookkeeping and campaign tables live beside the code that owns them; importing
# them here puts them in the metadata with the rest of the engine.
from app.engines.funnels.campaigns import models as _campaign_tables  # noqa: E402, F401
from app.engines.funnels.contacts import saved_segment_models as _segment_tables  # noqa: E402, F401
from app.engines.funnels.drafting import models as _drafting_tables  # noqa: E402, F401
from app.engines.funnels.events import models as _ingestion_tables  # noqa: E402, F401
from app.engines.funnels.events.sources import models as _source_tables  # noqa: E402, F401
from app.engines.funnels.outside import models as _outside_tables  # noqa: E402, F401
from app.engines.funnels.runs.due import entry_gate as _entry_gate_table  # noqa: E402, F401


class FrequencyCap(Base):
    """The workspace's rule: at most ``per_day`` / ``per_week`` marketing messages per contact
    (either may be empty), across every funnel and campaign."""

    __tablename__ = "funnel_frequency_caps"

    workspace_id: Mapped[int] = mapped_column(
        FK, ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
    )
    per_day: Mapped[int | None] = mapped_column(Integer, nullable=True)
    per_week: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class FrequencyCount(Base):
    """Marketing messages that went (or are going) out to a contact in one of their calendar
    days or weeks; the frequency cap's ledger (see :mod:`app.engines.funnels.outbox.work.frequency`)."""

    __tablename__ = "funnel_frequency_counts"
    __table_args__ = (Index("ix_funnel_frequency_counts_until", "until"),)

    contact_id: Mapped[int] = mapped_column(
        FK, ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True
    )
    period: Mapped[str] = mapped_column(String(16), primary_key=True)
    workspace_id: Mapped[int] = _ws()
    sent: Mapped[int] = mapped_column(Integer, default=0)
    until: Mapped[datetime] = mapped_column(UTCDateTime)
    """When the period ends (rows are pruned a day after)."""


class ErasedAddress(Base):
    """The suppression of a deleted contact's address, kept under a keyed hash of the address
    (see :mod:`app.engines.funnels.contacts.erased_addresses`): a re-imported address is not mailed."""

    __tablename__ = "funnel_erased_addresses"

    workspace_id: Mapped[int] = mapped_column(
        FK, ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    """``email`` or ``phone``."""
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    """HMAC-SHA256 of the normalised address under the instance's derived key (hex)."""
    suppressed: Mapped[dict[str, str]] = mapped_column(Json, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


from app.engines.funnels.experiments import models as _experiment_tables  # noqa: E402, F401
