"""Account security for the signed-in person (two-factor sign-in: enrol, new recovery codes,
turn off) and the organisation's requirement, which only owners set.

Codes typed on these pages count in the sign-in throttle like codes at sign-in: a stolen session
cannot guess its way to turning the second factor off.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.exceptions import PermissionDeniedException
from litestar.params import URLEncodedBody
from litestar.response import Redirect, Template

from app.errors import DomainError
from app.platform import two_factor, two_factor_policy
from app.platform import two_factor_events as events
from app.platform.models import User
from app.platform.service import Principal
from app.platform.two_factor_models import REQUIREMENTS
from app.runtime import Runtime
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard import sign_in_steps
from app.web.dashboard.common import page
from app.web.dashboard.qr import qr_svg

ACCOUNT_SECURITY = "/ui/account/security"
ORG_SECURITY = "/ui/organisation/security"

REQUIREMENT_LABELS = {
    "off": "Nobody is required to (each person may turn it on)",
    "owners_and_admins": "Owners and admins",
    "everyone": "Everyone in the organisation",
}


_EVENTS: dict[str, events.TwoFactorEvent] = {
    "enrol": "two_factor.enrolled",
    "disable": "two_factor.disabled",
    "regenerate": "two_factor.recovery_codes_regenerated",
}


class CodeForm(msgspec.Struct):
    code: str = ""


class RequirementForm(msgspec.Struct):
    two_factor_required: str = ""


async def _me(runtime: Runtime, principal: Principal) -> User:
    assert principal.user_id is not None  # session routes: always a person
    async with runtime.db.read() as session:
        user = await session.get(User, principal.user_id)
    assert user is not None
    return user


async def _account_page(
    request: Request[Any, Any, Any],
    runtime: Runtime,
    principal: Principal,
    *,
    error: str | None = None,
    notice: str | None = None,
    status: int = 200,
) -> Template:
    user = await _me(runtime, principal)
    async with runtime.db.write() as uow:
        state = await two_factor.status(uow.session, user.id)
        required = await two_factor_policy.required_for(uow.session, user)
        context: dict[str, Any] = {"qr": None, "secret": None}
        if not state.enrolled:
            secret = await two_factor.begin_enrolment(
                uow.session, runtime.secrets, user_id=user.id, now=runtime.clock.now()
            )
            uri = two_factor.provisioning_uri(secret, user.email)
            context = {
                "qr": qr_svg(uri, title="QR code of the two-factor secret"),
                "secret": secret,
            }
    tpl = page(
        request,
        "platform/account_security.html",
        principal,
        state=state,
        required=required,
        action=f"{ACCOUNT_SECURITY}/enrol",
        error=error,
        notice=notice,
        **context,
    )
    tpl.status_code = status
    return tpl


async def _checked(
    request: Request[Any, Any, Any], runtime: Runtime, user: User
) -> tuple[str, str | None]:
    """Count a code attempt in the throttle: the address, and the refusal to show if any."""
    address = sign_in_steps.caller_address(request, runtime)
    throttle = sign_in_steps.sign_in_throttle(runtime)
    wait = throttle.attempt(user.email, address, runtime.clock.now())
    return address, None if wait is None else sign_in_steps.too_many(wait)


def _codes_page(
    request: Request[Any, Any, Any], principal: Principal, codes: list[str]
) -> Template:
    return page(
        request,
        "platform/recovery_codes.html",
        principal,
        codes=codes,
        continue_to=ACCOUNT_SECURITY,
    )


@get(ACCOUNT_SECURITY)
async def account_security(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    return await _account_page(request, runtime, principal)


async def _code_action(
    request: Request[Any, Any, Any],
    runtime: Runtime,
    principal: Principal,
    code: str,
    action: str,
) -> Response[Any]:
    """Enrol, disable or regenerate with ``code``; a wrong code shows the page again (422)."""
    user = await _me(runtime, principal)
    address, refused = await _checked(request, runtime, user)
    if refused is not None:
        return await _account_page(request, runtime, principal, error=refused, status=429)
    now = runtime.clock.now()
    codes: list[str] = []
    try:
        async with runtime.db.write() as uow:
            if action == "enrol":
                codes = await two_factor.confirm_enrolment(
                    uow.session, runtime.secrets, user_id=user.id, code=code, now=now
                )
            elif action == "disable":
                required = await two_factor_policy.required_for(uow.session, user)
                await two_factor.disable(
                    uow.session,
                    runtime.secrets,
                    user_id=user.id,
                    code=code,
                    now=now,
                    required=required,
                )
            else:
                codes = await two_factor.regenerate_recovery_codes(
                    uow.session, runtime.secrets, user_id=user.id, code=code, now=now
                )
            await events.record(
                uow.session,
                _EVENTS[action],
                user_id=user.id,
                organisation_id=user.organisation_id,
                now=now,
            )
    except DomainError as exc:
        return await _account_page(
            request, runtime, principal, error=exc.message, status=exc.status
        )
    sign_in_steps.sign_in_throttle(runtime).succeeded(user.email, address)
    if action == "disable":
        return Redirect(ACCOUNT_SECURITY)
    return _codes_page(request, principal, codes)


@post(f"{ACCOUNT_SECURITY}/enrol")
async def confirm_enrolment(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: URLEncodedBody[CodeForm],
) -> Response[Any]:
    """Turn two-factor sign-in on with a code that proves the app has the secret."""
    return await _code_action(request, runtime, principal, data.code[:100], "enrol")


@post(f"{ACCOUNT_SECURITY}/disable")
async def disable(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: URLEncodedBody[CodeForm],
) -> Response[Any]:
    return await _code_action(request, runtime, principal, data.code[:100], "disable")


@post(f"{ACCOUNT_SECURITY}/recovery-codes")
async def regenerate_recovery_codes(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: URLEncodedBody[CodeForm],
) -> Response[Any]:
    return await _code_action(request, runtime, principal, data.code[:100], "regenerate")


# -- the organisation's requirement ------------------------------------------------------------


def _require_owner(principal: Principal) -> None:
    if principal.user_id is None or principal.org_role != "owner":
        raise PermissionDeniedException("Only organisation owners may change its sign-in policy")


async def _org_page(
    request: Request[Any, Any, Any],
    runtime: Runtime,
    principal: Principal,
    *,
    error: str | None = None,
    notice: str | None = None,
    status: int = 200,
) -> Template:
    async with runtime.db.read() as session:
        current = await two_factor_policy.requirement(session, principal.organisation_id)
        assert principal.user_id is not None
        enrolled = await two_factor.is_enrolled(session, principal.user_id)
    tpl = page(
        request,
        "platform/organisation_security.html",
        principal,
        current=current,
        choices=[(value, REQUIREMENT_LABELS[value]) for value in REQUIREMENTS],
        enrolled=enrolled,
        error=error,
        notice=notice,
    )
    tpl.status_code = status
    return tpl


@get(ORG_SECURITY)
async def organisation_security(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    _require_owner(principal)
    return await _org_page(request, runtime, principal)


@post(ORG_SECURITY)
async def set_requirement(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: URLEncodedBody[RequirementForm],
) -> Template:
    """Set who must sign in with a second factor; the sessions of people it now applies to who
    have not enrolled end (they enrol at their next sign-in)."""
    _require_owner(principal)
    assert principal.user_id is not None
    now = runtime.clock.now()
    try:
        async with runtime.db.write() as uow:
            before = await two_factor_policy.requirement(uow.session, principal.organisation_id)
            ended = await two_factor_policy.set_requirement(
                uow.session,
                organisation_id=principal.organisation_id,
                actor_id=principal.user_id,
                value=data.two_factor_required,
                now=now,
            )
            if data.two_factor_required != before:
                await events.record(
                    uow.session,
                    "two_factor.requirement_changed",
                    user_id=principal.user_id,
                    organisation_id=principal.organisation_id,
                    now=now,
                    before={"two_factor_required": before},
                    after={
                        "two_factor_required": data.two_factor_required,
                        "sessions_ended": ended,
                    },
                )
    except DomainError as exc:
        return await _org_page(request, runtime, principal, error=exc.message, status=exc.status)
    notice = "Saved." + (f" {ended} sessions of people not yet enrolled ended." if ended else "")
    return await _org_page(request, runtime, principal, notice=notice)


ROUTES = [
    account_security,
    confirm_enrolment,
    disable,
    regenerate_recovery_codes,
    organisation_security,
    set_requirement,
]
