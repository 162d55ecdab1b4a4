"""Two-factor sign-in for people: enrolment of an authenticator app, the check of a code or a
recovery code at sign-in, disabling, and new recovery codes.

Services never commit: the caller's unit of work does. A code is accepted with a conditional
``UPDATE`` (the step must be newer than the last one used; the recovery code must be unused), so
two requests racing with the same code cannot both pass, on SQLite or PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import delete, func, select, update

from app.db.session import ReadSession, WriteSession
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import recovery_codes, totp
from app.platform.crypto import SecretBox
from app.platform.models import User, UserSession
from app.platform.two_factor_models import RecoveryCode, UserTotp

ISSUER = "Sweepline"

SecondFactor = Literal["totp", "recovery_code"]


@dataclass(frozen=True, slots=True)
class TwoFactorStatus:
    enrolled: bool
    recovery_codes_left: int


def _wrong_code() -> ValidationFailed:
    return ValidationFailed.field(
        "code", "not a current code from the authenticator app (or an unused recovery code)"
    )


async def _row(session: ReadSession, user_id: int) -> UserTotp | None:
    row: UserTotp | None = await session.scalar(select(UserTotp).where(UserTotp.user_id == user_id))
    return row


async def is_enrolled(session: ReadSession, user_id: int) -> bool:
    confirmed = await session.scalar(
        select(UserTotp.id).where(UserTotp.user_id == user_id, UserTotp.confirmed_at.is_not(None))
    )
    return confirmed is not None


async def status(session: ReadSession, user_id: int) -> TwoFactorStatus:
    left = await session.scalar(
        select(func.count())
        .select_from(RecoveryCode)
        .where(RecoveryCode.user_id == user_id, RecoveryCode.used_at.is_(None))
    )
    return TwoFactorStatus(await is_enrolled(session, user_id), int(left or 0))


async def begin_enrolment(
    session: WriteSession, box: SecretBox, *, user_id: int, now: datetime
) -> str:
    """The secret to show as a QR code: the enrolment in progress keeps its secret (a reloaded
    page shows the same code), a new one gets a fresh secret. An enrolled person must disable
    two-factor sign-in before enrolling another app."""
    row = await _row(session, user_id)
    if row is not None and row.confirmed_at is not None:
        raise Conflict("two-factor sign-in is already on", code="two_factor_enrolled")
    if row is not None:
        return box.decrypt(row.secret_encrypted)
    secret = totp.new_secret()
    session.add(UserTotp(user_id=user_id, secret_encrypted=box.encrypt(secret), created_at=now))
    await session.flush()
    return secret


async def _new_recovery_codes(
    session: WriteSession, box: SecretBox, user_id: int, now: datetime
) -> list[str]:
    await session.execute(delete(RecoveryCode).where(RecoveryCode.user_id == user_id))
    codes = recovery_codes.new_codes()
    session.add_all(
        RecoveryCode(user_id=user_id, code_hash=recovery_codes.code_hash(box, c), created_at=now)
        for c in codes
    )
    await session.flush()
    return codes


async def confirm_enrolment(
    session: WriteSession, box: SecretBox, *, user_id: int, code: str, now: datetime
) -> list[str]:
    """Turn two-factor sign-in on once ``code`` proves the app has the secret; returns the
    recovery codes, to be shown once."""
    row = await _row(session, user_id)
    if row is None or row.confirmed_at is not None:
        raise Conflict("there is no enrolment in progress", code="no_enrolment")
    step = totp.matching_step(box.decrypt(row.secret_encrypted), code, now, last_used_step=None)
    if step is None:
        raise ValidationFailed.field("code", "not the current code of the authenticator app")
    row.confirmed_at = now
    row.last_used_step = step
    return await _new_recovery_codes(session, box, user_id, now)


async def _accept_totp(
    session: WriteSession, box: SecretBox, user_id: int, code: str, now: datetime
) -> bool:
    row = await _row(session, user_id)
    if row is None or row.confirmed_at is None:
        return False
    secret = box.decrypt(row.secret_encrypted)
    step = totp.matching_step(secret, code, now, last_used_step=row.last_used_step)
    if step is None:
        return False
    result = await session.execute(
        update(UserTotp)
        .where(
            UserTotp.id == row.id,
            (UserTotp.last_used_step.is_(None)) | (UserTotp.last_used_step < step),
        )
        .values(last_used_step=step)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))


async def _accept_recovery_code(
    session: WriteSession, box: SecretBox, user_id: int, code: str, now: datetime
) -> bool:
    result = await session.execute(
        update(RecoveryCode)
        .where(
            RecoveryCode.user_id == user_id,
            RecoveryCode.code_hash == recovery_codes.code_hash(box, code),
            RecoveryCode.used_at.is_(None),
        )
        .values(used_at=now)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))


async def check_second_factor(
    session: WriteSession, box: SecretBox, *, user_id: int, code: str, now: datetime
) -> SecondFactor | None:
    """Which second factor ``code`` is, once accepted and used up; ``None`` when it is wrong,
    replayed, or the person has no second factor."""
    if not await is_enrolled(session, user_id):
        return None
    if totp.looks_like_code(code):
        return "totp" if await _accept_totp(session, box, user_id, code, now) else None
    if recovery_codes.looks_like_recovery_code(code):
        accepted = await _accept_recovery_code(session, box, user_id, code, now)
        return "recovery_code" if accepted else None
    return None


async def disable(
    session: WriteSession,
    box: SecretBox,
    *,
    user_id: int,
    code: str,
    now: datetime,
    required: bool,
) -> SecondFactor:
    """Turn two-factor sign-in off with a current code (or a recovery code); refused while the
    organisation requires it of this person."""
    if required:
        raise Conflict(
            "your organisation requires two-factor sign-in: it cannot be turned off",
            code="two_factor_required",
        )
    used = await check_second_factor(session, box, user_id=user_id, code=code, now=now)
    if used is None:
        raise _wrong_code()
    await session.execute(delete(RecoveryCode).where(RecoveryCode.user_id == user_id))
    await session.execute(delete(UserTotp).where(UserTotp.user_id == user_id))
    return used


async def regenerate_recovery_codes(
    session: WriteSession, box: SecretBox, *, user_id: int, code: str, now: datetime
) -> list[str]:
    """New recovery codes (the old ones stop working), given a current code from the app."""
    if not totp.looks_like_code(code) or not await _accept_totp(session, box, user_id, code, now):
        raise ValidationFailed.field("code", "not a current code of the authenticator app")
    return await _new_recovery_codes(session, box, user_id, now)


async def remove(session: WriteSession, *, email: str) -> User:
    """An operator's way back in for a person who lost both the app and the recovery codes: the
    second factor goes, and so do the person's sessions (whoever has the phone may have one)."""
    user = await session.scalar(select(User).where(User.email == email.strip().lower()))
    if user is None:
        raise NotFound(f"no account has the e-mail {email.strip().lower()}")
    await session.execute(delete(RecoveryCode).where(RecoveryCode.user_id == user.id))
    await session.execute(delete(UserTotp).where(UserTotp.user_id == user.id))
    await session.execute(delete(UserSession).where(UserSession.user_id == user.id))
    return user


def provisioning_uri(secret: str, account: str) -> str:
    return totp.provisioning_uri(secret, account=account, issuer=ISSUER)
