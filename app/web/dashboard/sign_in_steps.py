"""What sign-in pages share: the throttle (passwords and second-factor codes count alike), the
client's address, the session cookie, and the step after a right password — straight into a
session, or first a code (or an enrolment) when two-factor sign-in applies."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from litestar import Request, Response
from litestar.response import Redirect

from app.db.session import ReadSession
from app.platform import sessions, signin_challenge, two_factor, two_factor_policy
from app.platform.models import User
from app.platform.throttle import SignInThrottle
from app.runtime import Runtime
from app.web.auth import SESSION_COOKIE
from app.web.client_address import Networks, client_address, parse_networks

SIGNIN_COOKIE = "swl_signin"
"""The sign-in challenge between the password and the second step (five minutes)."""
CODE_PAGE = "/login/two-factor"
ENROL_PAGE = "/login/two-factor/enrol"


def sign_in_throttle(runtime: Runtime) -> SignInThrottle:
    security = runtime.settings.security
    return runtime.resources.get(
        "platform.sign_in_throttle",
        lambda: SignInThrottle(
            max_failures=security.sign_in_max_failures,
            max_failures_per_address=security.sign_in_max_failures_per_address,
            window=timedelta(seconds=security.sign_in_window_seconds),
        ),
    )


def trusted_proxies(runtime: Runtime) -> Networks:
    return runtime.resources.get(
        "web.trusted_proxies", lambda: parse_networks(runtime.settings.web.trusted_proxies)
    )


def caller_address(request: Request[Any, Any, Any], runtime: Runtime) -> str:
    return client_address(request, trusted_proxies(runtime))


def too_many(wait: timedelta) -> str:
    minutes = max(1, math.ceil(wait.total_seconds() / 60))
    return f"Too many failed sign-ins. Try again in {minutes} min."


def set_session_cookie(response: Response[Any], runtime: Runtime, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="lax",
        secure=runtime.settings.web.secure_cookies,
        max_age=int(sessions.SESSION_LIFETIME.total_seconds()),
    )


def set_challenge_cookie(
    response: Response[Any],
    runtime: Runtime,
    *,
    user_id: int,
    stage: signin_challenge.Stage,
    target: str,
) -> None:
    token = signin_challenge.issue(
        runtime.session_secret, user_id=user_id, stage=stage, next=target, now=runtime.clock.now()
    )
    response.set_cookie(
        SIGNIN_COOKIE,
        token,
        httponly=True,
        samesite="lax",
        secure=runtime.settings.web.secure_cookies,
        max_age=int(signin_challenge.LIFETIME.total_seconds()),
    )


def read_challenge(
    request: Request[Any, Any, Any], runtime: Runtime, stage: signin_challenge.Stage
) -> signin_challenge.Challenge | None:
    token = request.cookies.get(SIGNIN_COOKIE, "")
    challenge = signin_challenge.read(runtime.session_secret, token, runtime.clock.now())
    return challenge if challenge is not None and challenge.stage == stage else None


async def second_step(
    session: ReadSession, runtime: Runtime, user: User, target: str
) -> Redirect | None:
    """After a right password: the way to the code page (two-factor sign-in is on), to
    enrolment (the organisation requires it and the person has not enrolled), or ``None`` when
    a session may be opened at once. No session exists before the second step is done."""
    if await two_factor.is_enrolled(session, user.id):
        stage: signin_challenge.Stage = "code"
    elif await two_factor_policy.required_for(session, user):
        stage = "enrol"
    else:
        return None
    redirect = Redirect(CODE_PAGE if stage == "code" else ENROL_PAGE)
    set_challenge_cookie(redirect, runtime, user_id=user.id, stage=stage, target=target)
    return redirect
