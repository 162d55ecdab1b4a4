"""The tables of "Connect with Facebook" (spec AR-29 to AR-32): what was learnt of the workspace's
Meta token when it was saved (where it came from, its scopes, when it expires), and the login
dialog's ``state`` values, each bound to one signed-in session, used once, expiring."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime

SOURCE_LOGIN = "facebook_login"
SOURCE_PASTED = "pasted"
TOKEN_SOURCES = (SOURCE_LOGIN, SOURCE_PASTED)


class MetaConnection(Base):
    """One per workspace, written with the token (the token itself is a workspace secret)."""

    __tablename__ = "adrules_meta_connections"
    __table_args__ = (
        CheckConstraint(
            "source IN ({})".format(", ".join(f"'{s}'" for s in TOKEN_SOURCES)),
            name="source",
        ),
    )

    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
    )
    source: Mapped[str] = mapped_column(String(16))
    scopes: Mapped[list[str]] = mapped_column(Json)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """None: the token does not expire (a system user's)."""
    checked_at: Mapped[datetime] = mapped_column(UTCDateTime)


class LoginState(Base):
    """A ``state`` handed to the login dialog. Only its hash is stored, beside the hash of the
    session cookie it was made for."""

    __tablename__ = "adrules_login_states"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    state_hash: Mapped[str] = mapped_column(String(64), unique=True)
    session_hash: Mapped[str] = mapped_column(String(64))
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
