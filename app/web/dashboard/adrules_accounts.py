"""Ad accounts and the Meta connection on the dashboard (spec AR-2, AR-29 to AR-32): Connect with
Facebook (the login dialog, the way back, the long-lived token), picking ad accounts from those the
token reaches, pasting a token instead (checked the same way), discovery and activation, and the
token's expiry with a reconnect prompt.

Meta is never called inside a write transaction: each handler asks Meta first, then writes in a
unit of work of its own, committed before the page is read again.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get, post
from litestar.params import FromPath
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.engines.adrules import accounts as account_service
from app.engines.adrules.connection import service as connection_service
from app.engines.adrules.connection import states
from app.engines.adrules.connection_models import SOURCE_LOGIN
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.errors import (
    LoginRefused,
    MetaLoginNotConfigured,
    MetaTokenMissing,
    MetaTokenRefused,
    MetaTokenRejected,
    MetaUnavailable,
)
from app.errors import DomainError
from app.platform.service import Principal
from app.runtime import Runtime
from app.web.api.adrules_accounts import (
    ask_meta_for_accounts,
    discover,
    meta_login,
    save_pasted_token,
)
from app.web.auth import SESSION_COOKIE, CurrentPrincipal, CurrentRuntime, require_admin
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Reads, Writes

AnyRequest = Request[Any, Any, Any]

MAX_TOKEN = 1000
MAX_STATE = 200
MAX_CODE = 2000
_PROBLEMS = (
    LoginRefused,
    MetaLoginNotConfigured,
    MetaTokenMissing,
    MetaTokenRefused,
    MetaTokenRejected,
    MetaUnavailable,
)


async def accounts_view(
    request: AnyRequest,
    principal: Principal,
    session: ReadSession,
    runtime: Runtime,
    *,
    message: str = "",
    error: DomainError | str | None = None,
) -> Template:
    accounts = await account_service.list_accounts(session, principal.workspace_id)
    has_token = await account_service.has_token(session, principal.workspace_id)
    now = runtime.clock.now()
    connection = (
        await connection_service.connection_view(session, principal.workspace_id, now=now)
        if has_token
        else None
    )
    text = error.message if isinstance(error, DomainError) else (error or "")
    template = page(
        request,
        "adrules/accounts.html",
        principal,
        accounts=accounts,
        has_token=has_token,
        connection=connection,
        now=now,
        login_ready=runtime.resources.require(AdRulesDeps).login is not None,
        message=message,
        error=text,
    )
    if isinstance(error, DomainError):
        template.status_code = error.status
    elif error:
        template.status_code = 422
    return template


@get("/ui/adrules/accounts")
async def accounts_page(
    request: AnyRequest, principal: CurrentPrincipal, session: Reads, runtime: CurrentRuntime
) -> Template:
    return await accounts_view(request, principal, session, runtime)


# -- a pasted token ---------------------------------------------------------------------------


@post("/ui/adrules/meta-token")
async def save_token(
    request: AnyRequest, principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template | Redirect:
    """Checked with Meta like a token from Facebook Login (spec AR-30); a refused one is not
    stored and the page says why."""
    require_admin(principal)
    token = str((await request.form()).get("token", "")).strip()
    problem: DomainError | str | None = None
    if len(token) < 10 or len(token) > MAX_TOKEN or not token.isascii() or " " in token:
        problem = (
            "Access token: paste the whole token Meta shows (10 to 1000 characters, no spaces)."
        )
    else:
        try:
            await save_pasted_token(runtime, principal.workspace_id, token)
        except _PROBLEMS as exc:
            problem = exc
    if problem is not None:
        async with runtime.db.read() as session:
            return await accounts_view(request, principal, session, runtime, error=problem)
    return Redirect("/ui/adrules/accounts")


# -- Connect with Facebook --------------------------------------------------------------------


@get("/ui/adrules/meta/connect")
async def connect(
    request: AnyRequest, principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template | Redirect:
    """Off to the login dialog with a ``state`` made for this session (spec AR-29, AR-32).

    A link, not a form: the pages' ``form-action 'self'`` policy stops a form's navigation from
    being redirected to Facebook. Starting a login changes nothing a forged request could use:
    the state only lets this session come back, and only the person's own consent yields a code.
    """
    require_admin(principal)
    cookie = request.cookies.get(SESSION_COOKIE, "")
    try:
        login = meta_login(runtime)
    except MetaLoginNotConfigured as exc:
        async with runtime.db.read() as session:
            return await accounts_view(request, principal, session, runtime, error=exc)
    if principal.user_id is None or not cookie:
        return Redirect("/login")
    async with runtime.db.write() as uow:
        state = await states.open_state(
            uow.session,
            workspace_id=principal.workspace_id,
            user_id=principal.user_id,
            session_token=cookie,
            now=runtime.clock.now(),
        )
    return Redirect(login.dialog_url(state), status_code=303)


async def _finish_login(request: AnyRequest, principal: Principal, runtime: Runtime) -> None:
    params = request.query_params
    state = params.get("state", "")
    code = params.get("code", "")
    cookie = request.cookies.get(SESSION_COOKIE, "")
    login = meta_login(runtime)
    if principal.user_id is None or not state or len(state) > MAX_STATE or not cookie:
        raise LoginRefused.field(
            "state",
            "This return from Facebook carries no login this session started. Start again with "
            "Connect with Facebook.",
            code="state_refused",
        )
    async with runtime.db.write() as uow:
        await states.take_state(
            uow.session,
            state=state,
            workspace_id=principal.workspace_id,
            user_id=principal.user_id,
            session_token=cookie,
            now=runtime.clock.now(),
        )
    if params.get("error"):
        reason = str(params.get("error_reason") or params.get("error") or "")
        raise LoginRefused.field(
            "code",
            f"Facebook Login was not completed ({reason[:100]}): nothing changed. Connect again "
            "and allow the ads permissions.",
            code="login_cancelled",
        )
    if not code or len(code) > MAX_CODE:
        raise LoginRefused.field(
            "code", "Facebook sent no usable login code back. Start again.", code="code_refused"
        )
    connected = await connection_service.connect_with_code(login, code, now=runtime.clock.now())
    async with runtime.db.write() as uow:
        await connection_service.save_token(
            uow.session,
            runtime.secrets,
            workspace_id=principal.workspace_id,
            token=connected.token,
            standing=connected.standing,
            source=SOURCE_LOGIN,
            now=runtime.clock.now(),
        )


@get("/ui/adrules/meta/callback")
async def login_callback(
    request: AnyRequest, principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template | Redirect:
    """Where the login dialog sends the person back: the state is used up first (whatever
    follows), then the code becomes a long-lived token, checked, stored; then the person picks
    the ad accounts."""
    require_admin(principal)
    try:
        await _finish_login(request, principal, runtime)
    except _PROBLEMS as exc:
        async with runtime.db.read() as session:
            return await accounts_view(request, principal, session, runtime, error=exc)
    return Redirect("/ui/adrules/accounts/pick")


# -- picking ad accounts ----------------------------------------------------------------------


@get("/ui/adrules/accounts/pick")
async def pick_page(
    request: AnyRequest, principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    """The ad accounts the token reaches (``/me/adaccounts``), the ones rules run on ticked."""
    require_admin(principal)
    try:
        found = await ask_meta_for_accounts(runtime, principal.workspace_id)
    except _PROBLEMS as exc:
        async with runtime.db.read() as session:
            return await accounts_view(request, principal, session, runtime, error=exc)
    async with runtime.db.read() as session:
        stored = await account_service.list_accounts(session, principal.workspace_id)
    active = {a.meta_id for a in stored if a.active}
    return page(request, "adrules/pick_accounts.html", principal, found=found, active=active)


@post("/ui/adrules/accounts/pick")
async def pick_accounts(
    request: AnyRequest, principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template | Redirect:
    """Every account Meta lists is stored; the ticked ones are switched on, the others off."""
    require_admin(principal)
    chosen = set((await request.form()).getall("account"))
    try:
        found = await ask_meta_for_accounts(runtime, principal.workspace_id)
    except _PROBLEMS as exc:
        async with runtime.db.read() as session:
            return await accounts_view(request, principal, session, runtime, error=exc)
    listed = {g.id if g.id.startswith("act_") else f"act_{g.id}" for g in found}
    unknown = sorted(chosen - listed)
    if unknown:
        async with runtime.db.read() as session:
            return await accounts_view(
                request,
                principal,
                session,
                runtime,
                error=f"Ad accounts: {', '.join(unknown)[:200]} is not among the accounts your "
                "Meta token reaches. Pick from the list.",
            )
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        stored = await account_service.record_discovered(
            uow.session, workspace_id=principal.workspace_id, found=found, now=now
        )
        for account in stored:
            if account.meta_id in listed:
                await account_service.set_active(
                    uow.session,
                    workspace_id=principal.workspace_id,
                    account_id=account.id,
                    active=account.meta_id in chosen,
                    now=now,
                )
    async with runtime.db.read() as session:
        return await accounts_view(
            request,
            principal,
            session,
            runtime,
            message=f"{len(chosen)} ad account(s) switched on for rules.",
        )


# -- discovery and activation -----------------------------------------------------------------


@post("/ui/adrules/accounts/discover")
async def discover_accounts(
    request: AnyRequest, principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    """Meta is asked outside any write transaction; what it reports is stored by ``discover``'s
    own unit of work, committed before the page reads it."""
    require_admin(principal)
    try:
        found = await discover(runtime, principal.workspace_id)
    except (MetaTokenMissing, MetaUnavailable, MetaTokenRejected) as exc:
        async with runtime.db.read() as session:
            return await accounts_view(request, principal, session, runtime, error=exc)
    async with runtime.db.read() as session:
        return await accounts_view(
            request,
            principal,
            session,
            runtime,
            message=f"Meta reports {len(found)} ad account(s).",
        )


async def _toggle(
    principal: Principal, uow: UnitOfWork, clock: Clock, account_id: int, active: bool
) -> Redirect:
    require_admin(principal)
    await account_service.set_active(
        uow.session,
        workspace_id=principal.workspace_id,
        account_id=account_id,
        active=active,
        now=clock.now(),
    )
    return Redirect("/ui/adrules/accounts")


@post("/ui/adrules/accounts/{account_id:int}/activate")
async def activate_account(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, account_id: FromPath[int]
) -> Redirect:
    return await _toggle(principal, uow, clock, account_id, True)


@post("/ui/adrules/accounts/{account_id:int}/deactivate")
async def deactivate_account(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, account_id: FromPath[int]
) -> Redirect:
    return await _toggle(principal, uow, clock, account_id, False)


ROUTES: list[Any] = [
    accounts_page,
    save_token,
    connect,
    login_callback,
    pick_page,
    pick_accounts,
    discover_accounts,
    activate_account,
    deactivate_account,
]
