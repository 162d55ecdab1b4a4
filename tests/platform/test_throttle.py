"""PL-2 sign-in: repeated wrong passwords for one e-mail from one address are refused for a while."""

from __future__ import annotations

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
from tests.platform.conftest import sign_in

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_failures_within_the_window_block_until_it_passes() -> None:
    throttle = SignInThrottle(max_failures=3, window=timedelta(minutes=15))
    for minute in range(3):
        assert throttle.retry_after("a@x.test", "10.0.0.1", T0 + timedelta(minutes=minute)) is None
        throttle.failed("A@X.test ", "10.0.0.1", T0 + timedelta(minutes=minute))
    now = T0 + timedelta(minutes=3)
    assert throttle.retry_after("a@x.test", "10.0.0.1", now) == timedelta(minutes=12)
    # Another address or another e-mail is not affected.
    assert throttle.retry_after("a@x.test", "10.0.0.2", now) is None
    assert throttle.retry_after("b@x.test", "10.0.0.1", now) is None
    # The oldest failure leaves the window: one more attempt is allowed.
    assert throttle.retry_after("a@x.test", "10.0.0.1", T0 + timedelta(minutes=15)) is None


def test_success_clears_the_count() -> None:
    throttle = SignInThrottle(max_failures=2, window=timedelta(minutes=15))
    throttle.failed("a@x.test", "ip", T0)
    throttle.succeeded("a@x.test", "ip")
    throttle.failed("a@x.test", "ip", T0)
    assert throttle.retry_after("a@x.test", "ip", T0) is None


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
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
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
