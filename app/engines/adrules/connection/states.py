"""The login dialog's ``state`` (spec AR-32): a random value made for one signed-in session of one
person in one workspace, good for ten minutes and for one return from the dialog. A return whose
state this session did not make, or made and already used, or made too long ago, is refused: a
page elsewhere cannot make a signed-in person connect a Facebook account of its choosing (CSRF).
Only hashes are stored, of the state and of the session cookie."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, or_

from app.db.session import WriteSession
from app.db.tenancy import scoped_update
from app.engines.adrules.connection_models import LoginState
from app.engines.adrules.errors import LoginRefused
from app.platform.tokens import sha256_hex

STATE_LIFETIME = timedelta(minutes=10)


async def open_state(
    session: WriteSession,
    *,
    workspace_id: int,
    user_id: int,
    session_token: str,
    now: datetime,
) -> str:
    """A new state for this session; the person's stale ones are cleared on the way."""
    await session.execute(
        delete(LoginState).where(
            LoginState.user_id == user_id,
            or_(LoginState.expires_at <= now, LoginState.used_at.is_not(None)),
        )
    )
    state = secrets.token_urlsafe(32)
    session.add(
        LoginState(
            state_hash=sha256_hex(state),
            session_hash=sha256_hex(session_token),
            workspace_id=workspace_id,
            user_id=user_id,
            created_at=now,
            expires_at=now + STATE_LIFETIME,
        )
    )
    await session.flush()
    return state


async def take_state(
    session: WriteSession,
    *,
    state: str,
    workspace_id: int,
    user_id: int,
    session_token: str,
    now: datetime,
) -> None:
    """Use ``state`` up, or refuse it. One statement: two returns with the same state cannot both
    take it."""
    taken = await session.execute(
        scoped_update(LoginState, workspace_id)
        .where(
            LoginState.state_hash == sha256_hex(state),
            LoginState.session_hash == sha256_hex(session_token),
            LoginState.user_id == user_id,
            LoginState.used_at.is_(None),
            LoginState.expires_at > now,
        )
        .values(used_at=now)
        .returning(LoginState.id)
    )
    if taken.first() is None:
        raise LoginRefused.field(
            "state",
            "This return from Facebook was not started from this session, was already used, or "
            "took longer than 10 minutes. Start again with Connect with Facebook.",
            code="state_refused",
        )
