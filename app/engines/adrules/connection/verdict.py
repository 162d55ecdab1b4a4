"""What Meta's ``debug_token`` answer means for a token about to be saved (spec AR-30), and when a
saved token's expiry calls for a reconnect (AR-31). Pure functions of the answer and ``now``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.engines.adrules.errors import MetaTokenRefused
from app.integrations.meta.login import LOGIN_SCOPES, TokenFacts

REQUIRED_SCOPES = LOGIN_SCOPES
"""``ads_read`` for Insights, ``ads_management`` for the changes rules make."""
RECONNECT_NOTICE = timedelta(days=7)
"""How long before a token expires the dashboard starts asking for a reconnect."""
EXPIRED_SUBCODE = 463


@dataclass(frozen=True, slots=True)
class TokenStanding:
    """A token Meta vouched for."""

    scopes: tuple[str, ...]
    expires_at: datetime | None
    """None: the token does not expire."""


def _refused(reason: str, message: str) -> MetaTokenRefused:
    return MetaTokenRefused(
        f"token: {message}",
        details=[{"field": "token", "message": message, "code": reason}],
    )


def _when(unix: int) -> datetime | None:
    return datetime.fromtimestamp(unix, UTC) if unix > 0 else None


def judge(facts: TokenFacts, *, app_id: str, now: datetime) -> TokenStanding:
    """The token's standing, or :class:`MetaTokenRefused` saying in plain words what is wrong."""
    expires_at = _when(facts.expires_at)
    expired = (expires_at is not None and expires_at <= now) or (
        facts.error is not None and facts.error.subcode == EXPIRED_SUBCODE
    )
    if expired:
        on = f" on {expires_at:%Y-%m-%d %H:%M} UTC" if expires_at is not None else ""
        raise _refused(
            "token_expired",
            f"This access token expired{on}. Connect with Facebook again to get a new one.",
        )
    if not facts.is_valid:
        said = facts.error.message if facts.error is not None and facts.error.message else ""
        raise _refused(
            "token_invalid",
            "Meta does not accept this access token"
            + (f" ({said})" if said else "")
            + ". Connect with Facebook, or paste a token copied whole.",
        )
    if facts.app_id and facts.app_id != app_id:
        raise _refused(
            "token_invalid",
            f"This access token was issued for another Meta app (app id {facts.app_id}); "
            "connect with Facebook to get one for this installation's app.",
        )
    missing = [s for s in REQUIRED_SCOPES if s not in facts.scopes]
    if missing:
        raise _refused(
            "token_scope_missing",
            f"This access token lacks the permission{'s' if len(missing) > 1 else ''} "
            f"{' and '.join(missing)}. Connect with Facebook again and allow "
            f"{'them' if len(missing) > 1 else 'it'}, or create a token with "
            f"{' and '.join(REQUIRED_SCOPES)}.",
        )
    return TokenStanding(scopes=tuple(facts.scopes), expires_at=expires_at)


def reconnect_due(expires_at: datetime | None, now: datetime) -> bool:
    """Whether the dashboard asks for a reconnect: the token has expired or soon will."""
    return expires_at is not None and expires_at - now <= RECONNECT_NOTICE
