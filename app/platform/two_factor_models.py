"""Two-factor sign-in tables: a person's authenticator secret, their recovery codes, and the
organisation's requirement."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, UTCDateTime

REQUIREMENTS = ("off", "owners_and_admins", "everyone")
"""Who an organisation requires to sign in with a second factor."""


class UserTotp(Base):
    """A person's authenticator secret, encrypted at rest. Until ``confirmed_at`` is set it is an
    enrolment in progress (the QR code was shown, no code has proved the app has it)."""

    __tablename__ = "user_totp"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), unique=True)
    secret_encrypted: Mapped[bytes] = mapped_column(LargeBinary)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_used_step: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """The 30-second step of the last code accepted: that code and older ones are refused."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RecoveryCode(Base):
    """One single-use recovery code, kept as a keyed hash (:mod:`app.platform.recovery_codes`)."""

    __tablename__ = "user_recovery_codes"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    code_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class OrganisationSecurity(Base):
    """An organisation's sign-in policy; no row is ``off``."""

    __tablename__ = "organisation_security"
    __table_args__ = (
        CheckConstraint(
            "two_factor_required IN ('off', 'owners_and_admins', 'everyone')",
            name="two_factor_required",
        ),
    )

    organisation_id: Mapped[int] = mapped_column(
        ForeignKey("organisations.id", ondelete="CASCADE"), primary_key=True
    )
    two_factor_required: Mapped[str] = mapped_column(String(24), default="off")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
