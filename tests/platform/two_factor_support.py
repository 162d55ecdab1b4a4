"""Helpers for the two-factor tests: codes are computed with pyotp, an implementation
independent of the one under test."""

from __future__ import annotations

import re
from datetime import datetime

import httpx
import pyotp

from app.clock import ManualClock
from tests.platform.conftest import csrf_from, post_form, sign_in

_SECRET = re.compile(r'id="two-factor-secret">([A-Z2-7]+)<')
_CODES = re.compile(r"<li><code>([a-z0-9-]+)</code></li>")


def code(secret: str, at: datetime) -> str:
    return pyotp.TOTP(secret).at(at)


def secret_on(html: str) -> str:
    match = _SECRET.search(html)
    assert match, "the page shows no two-factor secret"
    return match.group(1)


def recovery_codes_on(html: str) -> list[str]:
    return _CODES.findall(html)


async def enrol(client: httpx.AsyncClient, clock: ManualClock) -> tuple[str, list[str]]:
    """Turn two-factor sign-in on for the signed-in person from the account page; returns the
    secret and the recovery codes."""
    page = await client.get("/ui/account/security")
    assert page.status_code == 200
    secret = secret_on(page.text)
    done = await client.post(
        "/ui/account/security/enrol",
        data={"code": code(secret, clock.now()), "_csrf_token": csrf_from(page.text)},
    )
    assert done.status_code == 200, done.text
    codes = recovery_codes_on(done.text)
    assert len(codes) == 10
    return secret, codes


async def submit_code(client: httpx.AsyncClient, value: str) -> httpx.Response:
    """The second step of sign-in: load the code page, post ``value`` with its CSRF token."""
    page = await client.get("/login/two-factor")
    assert page.status_code == 200, page.status_code
    return await client.post(
        "/login/two-factor", data={"code": value, "_csrf_token": csrf_from(page.text)}
    )


async def sign_in_with_code(
    client: httpx.AsyncClient, email: str, password: str, value: str
) -> httpx.Response:
    first = await sign_in(client, email, password)
    assert first.status_code in (302, 303)
    assert first.headers["location"] == "/login/two-factor"
    return await submit_code(client, value)


__all__ = ["post_form"]
