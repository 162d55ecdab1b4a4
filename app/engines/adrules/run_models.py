"""Tables the worker writes: one execution record per campaign, task and run, and the database copy
of each spreadsheet a custom metric reads.

Records are evidence (spec AR-18, AR-25): every condition with the value it saw, the action's
parameters, the value before and after, the per-step timeline and the next permitted time. The
cooldown check reads the latest *executed* record of a task and campaign, through a partial index
that holds executed records only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.adrules.record_states import RECORD_ERROR as RECORD_ERROR
from app.engines.adrules.record_states import RECORD_EXECUTED as RECORD_EXECUTED
from app.engines.adrules.record_states import RECORD_NOT_EXECUTED as RECORD_NOT_EXECUTED
from app.engines.adrules.record_states import RECORD_PROPOSED as RECORD_PROPOSED
from app.engines.adrules.record_states import RECORD_SKIPPED as RECORD_SKIPPED
from app.engines.adrules.record_states import RECORD_STATUSES as RECORD_STATUSES
from app.engines.adrules.record_states import RECORD_WOULD_EXECUTE as RECORD_WOULD_EXECUTE
from app.engines.adrules.record_states import RECORDS as RECORDS


class ExecutionRecord(Base):
    """What one task did to one campaign in one run."""

    __tablename__ = "adrules_records"
    __table_args__ = (
        Index("ix_adrules_records_batch", "workspace_id", "batch_id"),
        Index(
            "ix_adrules_records_cooldown",
            "task_id",
            "campaign_id",
            "created_at",
            sqlite_where=text(RECORDS.where(RECORD_EXECUTED)),
            postgresql_where=text(RECORDS.where(RECORD_EXECUTED)),
        ),
        # A shadow rule's own cooldowns count what it would have done.
        Index(
            "ix_adrules_records_shadow_cooldown",
            "task_id",
            "campaign_id",
            "created_at",
            sqlite_where=text(RECORDS.where(RECORD_WOULD_EXECUTE)),
            postgresql_where=text(RECORDS.where(RECORD_WOULD_EXECUTE)),
        ),
        # The cross-rule guards: every executed change of one object, whichever rule made it.
        Index(
            "ix_adrules_records_object_changes",
            "ad_account_id",
            "campaign_id",
            "created_at",
            sqlite_where=text(RECORDS.where(RECORD_EXECUTED)),
            postgresql_where=text(RECORDS.where(RECORD_EXECUTED)),
        ),
        RECORDS.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    rule_id: Mapped[int] = mapped_column(BigId, ForeignKey("adrules_rules.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(BigId, ForeignKey("adrules_tasks.id", ondelete="CASCADE"))
    ad_account_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("adrules_ad_accounts.id", ondelete="CASCADE")
    )
    batch_id: Mapped[str] = mapped_column(String(32))
    campaign_id: Mapped[str] = mapped_column(String(40))
    campaign_name: Mapped[str] = mapped_column(String(400))
    action: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    """Why it was skipped, not executed or failed."""
    parameters: Mapped[dict[str, Any]] = mapped_column(Json)
    before: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    after: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    conditions: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    steps: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    """``[{"step": name, "seconds": elapsed}]`` in order (shown to workspace admins only)."""
    elapsed_seconds: Mapped[float] = mapped_column(Float)
    next_permitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    timezone: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The IANA zone the run evaluated in (spec AR-44)."""
    attribution: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """The attribution the Insights were read with (spec AR-41): ``unified`` (each ad set's own
    setting) or Meta's windows, comma-separated (``7d_click,1d_view``)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SheetCopy(Base):
    """The last rows read from one sheet, used when the live read fails (spec AR-15)."""

    __tablename__ = "adrules_sheet_copies"
    __table_args__ = (
        UniqueConstraint(
            "workspace_id", "spreadsheet_id", "sheet_name", name="uq_adrules_sheet_copies_sheet"
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    spreadsheet_id: Mapped[str] = mapped_column(String(100))
    sheet_name: Mapped[str] = mapped_column(String(100))
    rows: Mapped[list[list[Any]]] = mapped_column(Json)
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime)
