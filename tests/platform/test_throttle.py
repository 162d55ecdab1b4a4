"""PL-2 sign-in: repeated wrong passwords for one e-mail from one address are refused for a while."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.clock import ManualClock
from app.db.session import Database
from app.platform.throttle import SignInThrottle
from app.settings import Settings
from app.wiring import assemble
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport
from tests.platform.conftest import sign_in

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_failures_within_the_window_block_until_it_passes() -> None:
    throttle = SignInThrottle(max_failures=3, window=timedelta(minutes=15))
    for minute in range(3):
        assert throttle.attempt("A@X.test ", "10.0.0.1", T0 + timedelta(minutes=minute)) is None
    now = T0 + timedelta(minutes=3)
    assert throttle.attempt("a@x.test", "10.0.0.1", now) == timedelta(minutes=12)
    # The account is refused from another address too; another account from the first is not.
    assert throttle.attempt("a@x.test", "10.0.0.2", now) == timedelta(minutes=12)
    assert throttle.attempt("b@x.test", "10.0.0.1", now) is None
    # The oldest failure leaves the window: one more attempt is allowed.
    assert throttle.attempt("a@x.test", "10.0.0.1", T0 + timedelta(minutes=15)) is None


def test_one_address_trying_many_accounts_is_refused() -> None:
    throttle = SignInThrottle(max_failures=3, max_failures_per_address=5, window=timedelta(hours=1))
    for n in range(5):
        assert throttle.attempt(f"user{n}@x.test", "10.0.0.9", T0) is None
    assert throttle.attempt("user9@x.test", "10.0.0.9", T0) is not None
    assert throttle.attempt("user9@x.test", "10.0.0.10", T0) is None


def test_success_takes_its_attempt_back_and_clears_the_account() -> None:
    throttle = SignInThrottle(max_failures=2, max_failures_per_address=2, window=timedelta(hours=1))
    assert throttle.attempt("a@x.test", "ip", T0) is None
    assert throttle.attempt("a@x.test", "ip", T0) is None
    throttle.succeeded("a@x.test", "ip")  # the second attempt had the right password
    assert throttle.attempt("a@x.test", "ip", T0) is None
    assert throttle.attempt("a@x.test", "ip", T0) is not None  # the address has had 2 failures


@pytest.fixture
async def strict_client(
    settings: Settings, shared_db: Database, clock: ManualClock
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with SIGN_IN_MAX_FAILURES=3."""
    from app.web.app import create_app

    strict = dataclasses.replace(
        settings, security=dataclasses.replace(settings.security, sign_in_max_failures=3)
    )
    rt = assemble(strict, clock, db=shared_db)
    app = create_app(strict, rt, background=False)
    try:
        async with httpx.AsyncClient(
            transport=asgi_transport(app), base_url="http://testserver"
        ) as c:
            yield c
    finally:
        await rt.queue.aclose()


async def test_pl2_sign_in_is_refused_after_repeated_failures(
    strict_client: httpx.AsyncClient, tenant: Tenant, clock: ManualClock
) -> None:
    for _ in range(3):
        assert (await sign_in(strict_client, tenant.email, "wrong password")).status_code == 401
    r = await sign_in(strict_client, tenant.email, tenant.password)
    assert r.status_code == 429
    assert "Too many failed sign-ins. Try again in 15 min." in r.text
    assert "swl_session" not in r.cookies
    clock.advance(15 * 60)
    r = await sign_in(strict_client, tenant.email, tenant.password)
    assert r.status_code in (302, 303)


async def test_concurrent_wrong_sign_ins_are_refused_before_they_are_verified(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """50 wrong passwords in parallel, then the right one: only SIGN_IN_MAX_FAILURES (10)
    attempts reach password verification (401), the others answer 429 at once, and the right
    password is refused too while the account is locked."""
    wrong = await asyncio.gather(*(sign_in(client, tenant.email, f"wrong {n}") for n in range(50)))
    statuses = sorted(r.status_code for r in wrong)
    assert statuses.count(401) == 10
    assert statuses.count(429) == 40
    right = await sign_in(client, tenant.email, tenant.password)
    assert right.status_code == 429


async def test_forwarded_for_is_ignored_from_an_untrusted_peer(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """The test client connects from 127.0.0.1, which is not a trusted proxy: a client that
    writes X-Forwarded-For cannot pick a fresh address for each guess."""
    for n in range(10):
        r = await sign_in(client, tenant.email, "wrong", forwarded_for=f"203.0.113.{n}")
        assert r.status_code == 401
    locked = await sign_in(client, "other@x.test", "wrong", forwarded_for="203.0.113.99")
    assert locked.status_code == 401  # another account is still counted apart
    assert (
        await sign_in(client, tenant.email, "wrong", forwarded_for="198.51.100.1")
    ).status_code == 429


def test_the_client_behind_a_trusted_proxy_is_the_right_most_untrusted_hop() -> None:
    from litestar import Request

    from app.web.client_address import client_address, parse_networks

    def request(peer: str, forwarded: str) -> Request:
        scope = {
            "type": "http",
            "method": "GET",
            "path": "/",
            "headers": [(b"x-forwarded-for", forwarded.encode())],
            "client": (peer, 1234),
            "query_string": b"",
        }
        return Request(scope)  # type: ignore[arg-type]

    proxies = parse_networks("10.9.0.0/16, ::1")
    assert client_address(request("10.9.0.5", "1.1.1.1, 203.0.113.7, 10.9.0.4"), proxies) == (
        "203.0.113.7"
    )
    assert client_address(request("127.0.0.1", "203.0.113.7"), proxies) == "127.0.0.1"
    assert client_address(request("10.9.0.5", "not-an-ip"), proxies) == "10.9.0.5"
    assert client_address(request("10.9.0.5", "203.0.113.7"), ()) == "10.9.0.5"
