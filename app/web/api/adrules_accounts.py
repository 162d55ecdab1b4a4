"""Ad rules JSON API, the connection to Meta: the workspace's Meta token (checked with Meta before
it is stored, never returned: spec AR-24, AR-30) and its ad accounts (discovered from Meta,
activated and deactivated). The handlers are registered with the rest of the ad rules API in
:mod:`app.web.api.adrules`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from litestar import Response, get, post, put
from litestar.params import FromPath, JSONBody

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.engines.adrules import accounts as account_service
from app.engines.adrules.connection import service as connection_service
from app.engines.adrules.connection_models import SOURCE_PASTED
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.errors import MetaLoginNotConfigured, meta_refusal
from app.engines.adrules.models import AdAccount
from app.integrations.meta.errors import MetaError
from app.integrations.meta.login import MetaLogin
from app.integrations.meta.structs import GraphAdAccount
from app.platform.service import Principal
from app.runtime import Runtime
from app.schemas import Schema
from app.web.api.common import Idempotency, Once
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_admin
from app.web.deps import CurrentClock, Reads


class TokenIn(Schema):
    token: Annotated[str, msgspec.Meta(min_length=10, max_length=1000, pattern=r"^[\x21-\x7e]+$")]
    """Printable ASCII without spaces, as Meta issues them: it travels in a header."""


class TokenState(Schema):
    configured: bool
    """Whether a token is stored; the token itself is never returned."""
    source: str | None = None
    """``facebook_login`` or ``pasted``; null for a token stored before tokens were checked."""
    scopes: list[str] | None = None
    """The permissions Meta reported when the token was saved."""
    expires_at: datetime | None = None
    """When the token expires; null: it does not (or is unknown)."""
    reconnect: bool = False
    """The token has expired or expires within a week: connect with Facebook again."""


class AccountOut(Schema):
    id: int
    meta_id: str
    name: str
    currency: str
    timezone_name: str
    account_status: int
    active: bool
    discovered_at: datetime
    activated_at: datetime | None


def account_out(a: AdAccount) -> AccountOut:
    return AccountOut(
        id=a.id,
        meta_id=a.meta_id,
        name=a.name,
        currency=a.currency,
        timezone_name=a.timezone_name,
        account_status=a.account_status,
        active=a.active,
        discovered_at=a.discovered_at,
        activated_at=a.activated_at,
    )


def meta_login(runtime: Runtime) -> MetaLogin:
    """The operator's Meta app, or the 409 that says how to set it."""
    login = runtime.resources.require(AdRulesDeps).login
    if login is None:
        raise MetaLoginNotConfigured(
            "The Meta app is not set: the operator sets META_APP_ID and META_APP_SECRET so that "
            "tokens can be checked and Connect with Facebook can start."
        )
    return login


async def save_pasted_token(runtime: Runtime, workspace_id: int, token: str) -> None:
    """Check a pasted token with Meta (no transaction open meanwhile), then store it with what
    the check learnt (spec AR-30); a refused token leaves the stored one as it was."""
    standing = await connection_service.check_token(
        meta_login(runtime), token, now=runtime.clock.now()
    )
    async with runtime.db.write() as uow:
        await connection_service.save_token(
            uow.session,
            runtime.secrets,
            workspace_id=workspace_id,
            token=token,
            standing=standing,
            source=SOURCE_PASTED,
            now=runtime.clock.now(),
        )


async def token_state(session: ReadSession, workspace_id: int, now: datetime) -> TokenState:
    configured = await account_service.has_token(session, workspace_id)
    view = await connection_service.connection_view(session, workspace_id, now=now)
    if not configured or view is None:
        return TokenState(configured=configured)
    return TokenState(
        configured=True,
        source=view.source,
        scopes=list(view.scopes),
        expires_at=view.expires_at,
        reconnect=view.reconnect,
    )


@put("/meta-token", status_code=200)
async def set_meta_token(
    principal: CurrentPrincipal, runtime: CurrentRuntime, data: JSONBody[TokenIn]
) -> TokenState:
    """The token is checked with Meta before it is stored (``debug_token``): 422
    ``meta_token_refused`` names the reason (``token_invalid``, ``token_expired``,
    ``token_scope_missing``); 409 ``meta_app_not_configured`` without a Meta app; 502 when Meta
    could not be asked."""
    require_admin(principal)
    await save_pasted_token(runtime, principal.workspace_id, data.token.strip())
    async with runtime.db.read() as session:
        return await token_state(session, principal.workspace_id, runtime.clock.now())


@get("/meta-token")
async def get_meta_token(
    principal: CurrentPrincipal, session: Reads, clock: CurrentClock
) -> TokenState:
    return await token_state(session, principal.workspace_id, clock.now())


async def ask_meta_for_accounts(runtime: Runtime, workspace_id: int) -> list[GraphAdAccount]:
    """The ad accounts the workspace's token reaches, as Meta lists them (reading only)."""
    async with runtime.db.read() as session:
        token = await account_service.require_token(session, runtime.secrets, workspace_id)
    reader = runtime.resources.require(AdRulesDeps).reader(token)
    try:
        return await reader.ad_accounts()
    except MetaError as exc:
        raise meta_refusal("Meta refused the ad account list", exc) from None


async def discover(runtime: Runtime, workspace_id: int) -> list[AdAccount]:
    """Ask Meta which ad accounts the workspace's token reaches; new ones are stored inactive."""
    found = await ask_meta_for_accounts(runtime, workspace_id)
    async with runtime.db.write() as uow:
        return await account_service.record_discovered(
            uow.session, workspace_id=workspace_id, found=found, now=runtime.clock.now()
        )


@post("/accounts/discover", status_code=200)
async def discover_accounts(
    principal: CurrentPrincipal, runtime: CurrentRuntime, once: Once
) -> Response[list[AccountOut]]:
    """Honours ``Idempotency-Key``. Meta is asked before the key is looked at, so that no write
    transaction stays open across a network call; a replay reads again and writes nothing."""
    require_admin(principal)
    found = await ask_meta_for_accounts(runtime, principal.workspace_id)

    async def action(uow: UnitOfWork) -> list[AccountOut]:
        stored = await account_service.record_discovered(
            uow.session, workspace_id=principal.workspace_id, found=found, now=runtime.clock.now()
        )
        return [account_out(a) for a in stored]

    return await once(action, status_code=200)


@get("/accounts")
async def list_accounts(principal: CurrentPrincipal, session: Reads) -> list[AccountOut]:
    return [
        account_out(a) for a in await account_service.list_accounts(session, principal.workspace_id)
    ]


@get("/accounts/{account_id:int}")
async def get_account(
    principal: CurrentPrincipal, session: Reads, account_id: FromPath[int]
) -> AccountOut:
    return account_out(
        await account_service.get_account(session, principal.workspace_id, account_id)
    )


async def _set_active(
    principal: Principal, once: Idempotency, clock: Clock, account_id: int, active: bool
) -> Response[AccountOut]:
    require_admin(principal)

    async def action(uow: UnitOfWork) -> AccountOut:
        account = await account_service.set_active(
            uow.session,
            workspace_id=principal.workspace_id,
            account_id=account_id,
            active=active,
            now=clock.now(),
        )
        return account_out(account)

    return await once(action, status_code=200)


@post("/accounts/{account_id:int}/activate", status_code=200)
async def activate_account(
    principal: CurrentPrincipal, once: Once, clock: CurrentClock, account_id: FromPath[int]
) -> Response[AccountOut]:
    """Let rules run on the account (honours ``Idempotency-Key``)."""
    return await _set_active(principal, once, clock, account_id, True)


@post("/accounts/{account_id:int}/deactivate", status_code=200)
async def deactivate_account(
    principal: CurrentPrincipal, once: Once, clock: CurrentClock, account_id: FromPath[int]
) -> Response[AccountOut]:
    """Stop rules running on the account (honours ``Idempotency-Key``)."""
    return await _set_active(principal, once, clock, account_id, False)
