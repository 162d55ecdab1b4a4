"""Getting, checking and keeping the workspace's Meta token (spec AR-29 to AR-31).

The Meta calls (:func:`check_token`, :func:`connect_with_code`) run outside any transaction and
write nothing; :func:`save_token` writes the token (encrypted, AR-24) and what was learnt of it in
the caller's unit of work, so a token is never stored without its check."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.adrules.accounts import store_token
from app.engines.adrules.connection.verdict import TokenStanding, judge, reconnect_due
from app.engines.adrules.connection_models import MetaConnection
from app.engines.adrules.errors import LoginRefused, MetaUnavailable
from app.integrations.meta.errors import MetaError
from app.integrations.meta.login import MetaLogin
from app.platform.crypto import SecretBox

OAUTH_CODE_ERROR = 100


@dataclass(frozen=True, slots=True)
class Connected:
    """A token Meta issued through Facebook Login and vouched for."""

    token: str
    standing: TokenStanding

    def __repr__(self) -> str:
        return f"Connected(token=***, standing={self.standing!r})"


@dataclass(frozen=True, slots=True)
class ConnectionView:
    """What the dashboard and the API show of the workspace's token (never the token)."""

    source: str
    scopes: tuple[str, ...]
    expires_at: datetime | None
    checked_at: datetime
    reconnect: bool
    """The token has expired or expires within a week: ask for a reconnect."""


def _unavailable(what: str, error: MetaError) -> MetaUnavailable:
    return MetaUnavailable(
        f"Meta could not be asked to {what}: {error.describe()}. Nothing was saved; try again "
        "in a moment."
    )


async def check_token(login: MetaLogin, token: str, *, now: datetime) -> TokenStanding:
    """Ask Meta about ``token`` (``debug_token`` with the app's access token) and judge it."""
    try:
        facts = await login.inspect(token)
    except MetaError as exc:
        raise _unavailable("check the token", exc) from None
    return judge(facts, app_id=login.app.app_id, now=now)


async def connect_with_code(login: MetaLogin, code: str, *, now: datetime) -> Connected:
    """The dialog's code → a user token → a long-lived token, checked like a pasted one."""
    try:
        short = await login.exchange_code(code)
    except MetaError as exc:
        if exc.code in (OAUTH_CODE_ERROR, 190) and not exc.transient:
            raise LoginRefused.field(
                "code",
                f"Meta refused the login code ({exc.message}). Start again with Connect with "
                "Facebook.",
                code="code_refused",
            ) from None
        raise _unavailable("finish the login", exc) from None
    try:
        long_lived = await login.long_lived(short.access_token)
    except MetaError as exc:
        raise _unavailable("extend the token", exc) from None
    standing = await check_token(login, long_lived.access_token, now=now)
    return Connected(long_lived.access_token, standing)


async def save_token(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    token: str,
    standing: TokenStanding,
    source: str,
    now: datetime,
) -> None:
    """The token (encrypted) and what its check learnt, together."""
    await store_token(session, box, workspace_id=workspace_id, token=token, now=now)
    connection = await session.get(MetaConnection, workspace_id)
    if connection is None:
        connection = MetaConnection(workspace_id=workspace_id)
        session.add(connection)
    connection.source = source
    connection.scopes = list(standing.scopes)
    connection.expires_at = standing.expires_at
    connection.checked_at = now
    await session.flush()


async def connection_view(
    session: ReadSession, workspace_id: int, *, now: datetime
) -> ConnectionView | None:
    """None when the token was stored without a check (before checks existed) or never set."""
    row = await session.scalar(scoped_select(MetaConnection, workspace_id))
    if row is None:
        return None
    return ConnectionView(
        source=row.source,
        scopes=tuple(row.scopes),
        expires_at=row.expires_at,
        checked_at=row.checked_at,
        reconnect=reconnect_due(row.expires_at, now),
    )
