"""The audit log's table: one row per side-effecting action of a person or a key.

Rows are only ever added. The database refuses to change or remove them (a trigger on each
backend, see :mod:`app.platform.audit.append_only`) except inside a transaction that has
unlocked the table on purpose: the retention sweep, erasure and the tests' cleanup.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime

ACTOR_KINDS = ("user", "api_key", "system", "anonymous")
"""Who acted: a signed-in person, a workspace API key, the service itself (a sweep), or a
caller not (yet) known (failed sign-ins)."""


class AuditEntry(Base):
    __tablename__ = "audit_log"
    __table_args__ = (
        CheckConstraint(
            "actor_kind IN ('user', 'api_key', 'system', 'anonymous')", name="actor_kind"
        ),
        Index("ix_audit_log_org_id", "organisation_id", "id"),
        Index("ix_audit_log_at", "at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    # No foreign keys to the organisation or the actor: the trail outlives a removed person or
    # key (and a cascade would try to delete rows the trigger keeps).
    organisation_id: Mapped[int] = mapped_column(BigId)
    workspace_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    actor_kind: Mapped[str] = mapped_column(String(16))
    user_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    api_key_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    client_address: Mapped[str] = mapped_column(String(64), default="")
    user_agent: Mapped[str] = mapped_column(String(400), default="")
    action: Mapped[str] = mapped_column(String(64))
    object_type: Mapped[str] = mapped_column(String(64))
    object_id: Mapped[str] = mapped_column(String(255), default="")
    before: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    after: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)


class AuditUnlock(Base):
    """SQLite's switch for the append-only trigger (SQLite has no session settings): a row here,
    inserted and removed again inside one write transaction, lets that transaction change or
    remove audit rows. SQLite runs one writer at a time, so no other transaction sees it."""

    __tablename__ = "audit_log_unlock"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
