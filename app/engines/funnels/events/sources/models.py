"""The table of webhook sources."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, UTCDateTime


class WebhookSource(Base):
    """One provider endpoint posting events to a workspace."""

    __tablename__ = "funnel_webhook_sources"
    __table_args__ = (UniqueConstraint("workspace_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    public_id: Mapped[str] = mapped_column(String(40), unique=True)
    """The random part of the source's URL (``/hooks/funnels/sources/<public_id>``): it finds
    the source, the signature proves the sender."""
    name: Mapped[str] = mapped_column(String(100))
    provider: Mapped[str] = mapped_column(String(16))
    """``stripe``, ``calcom`` or ``sweepline`` (our own signature)."""
    receives: Mapped[str] = mapped_column(String(16))
    """``payment`` or ``booking``: which trigger its events feed."""
    secret_ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    """The signing secret, encrypted with the instance key (as every workspace secret)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    secret_rotated_at: Mapped[datetime] = mapped_column(UTCDateTime)
