"""The record kept with a funnel drafted by a model (FN-35): what was asked, of which model at
which endpoint, what each round answered and cost, what the validator still finds and how
sample contacts walk the draft. One per drafted funnel; it stays when the draft is edited, as
the history of where the draft came from."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime

OUTCOMES = ("valid", "repaired", "invalid")
"""``valid`` at the first answer; ``repaired`` valid after repair rounds; ``invalid``: findings
remain after the last round (the draft is kept with them pinned on its steps)."""


class AiDraft(Base):
    __tablename__ = "funnel_ai_drafts"
    __table_args__ = (
        CheckConstraint("outcome IN ('valid', 'repaired', 'invalid')", name="outcome"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    funnel_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("funnels.id", ondelete="CASCADE"), unique=True
    )
    created_by: Mapped[int | None] = mapped_column(BigId, nullable=True)
    """The person who asked (``None`` for an API key)."""
    description: Mapped[str] = mapped_column(Text)
    """The journey as the person described it, in their words."""
    constraints: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    """Trigger, audience and channels the person chose."""
    model: Mapped[str] = mapped_column(String(100))
    endpoint: Mapped[str] = mapped_column(String(500))
    """The chat-completions URL called."""
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    total_tokens: Mapped[int] = mapped_column(Integer, default=0)
    rounds: Mapped[list[dict[str, Any]]] = mapped_column(Json, default=list)
    """Per round: its number, the messages it sent (the whole prompt in the first, the repair
    request after), the model's answer, its tokens and the findings the answer had."""
    outcome: Mapped[str] = mapped_column(String(16))
    findings: Mapped[list[dict[str, Any]]] = mapped_column(Json, default=list)
    """The validator's findings on the stored draft (empty when valid)."""
    simulation: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    """Sample contacts walked through the draft: per contact, the outcome, path and messages."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
