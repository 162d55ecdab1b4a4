"""The dashboard shell in a real headless Chromium: sign-in, home page (sweepers, queue, refreshed
by htmx), the platform-stop banner, the workspace page (API keys) and sign-out."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete

from app.clock import ManualClock
from app.db.session import Database
from app.platform.models import UserSession
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep, SweepRunner
from app.settings import Settings
from app.web.app import ENGINE_UIS
from app.wiring import assemble
from tests.e2e.conftest import sign_in
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_sign_in_and_see_home(
    page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    await sign_in(page, live_url, tenant.email, tenant.password)
    assert await page.locator("h1").inner_text() == "Acme main"
    # The home page is the getting-started view; the machinery is on the operations page.
    assert await page.locator("#getting-started section").count() == 3
    assert await page.locator("#getting-started li[data-done=true]").count() == 0
    await page.goto(f"{live_url}/ui/operations")
    assert await page.locator("#sweepers").count() == 1
    # Every registered sweep is listed, even before its first tick.
    for sweep in runtime.sweeps:
        row = page.locator(f'#sweepers tr[data-sweep="{sweep.name}"]')
        assert await row.count() == 1
        assert "never" in await row.inner_text()
    assert "Queued 0" in await page.locator("#queue-depth").inner_text()
    nav = page.locator("nav[aria-label=Main]")
    assert await nav.locator("a", has_text="Home").count() == 1
    for ui in ENGINE_UIS:  # each engine's links, as the engines declare them
        for href, label in ui.NAV:
            assert await nav.locator(f'a[href="{href}"]', has_text=label).count() == 1
    assert await page.locator("#platform-stop").count() == 0
    # The status part refreshes itself with htmx.
    assert await page.locator("#status").get_attribute("hx-get") == "/ui/partials/status"


async def test_wrong_password_stays_on_sign_in(page: Any, live_url: str, tenant: Tenant) -> None:
    await page.goto(f"{live_url}/login")
    await page.fill("input[name=email]", tenant.email)
    await page.fill("input[name=password]", "wrong password")
    await page.click("button[type=submit]")
    assert "Wrong e-mail or password" in await page.locator(".error").inner_text()


async def test_home_status_refreshes_with_a_failing_tick(
    page: Any, live_url: str, tenant: Tenant, runtime: Runtime, clock: ManualClock
) -> None:
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/operations")

    async def broken(ctx: JobContext, tick: Any) -> None:
        raise RuntimeError("provider answered 503")

    sweep = Sweep("smoke-broken", EVERY_10_SECONDS, broken)
    runner = SweepRunner(
        runtime.db, clock, [sweep], runtime.context, owner="smoke", lease_seconds=60
    )
    clock.advance(3)
    assert await runner.run_tick(sweep, clock.now() - timedelta(seconds=3))
    # Ask htmx for the refresh the 10-second poll would make.
    await page.evaluate(
        "htmx.ajax('GET', '/ui/partials/status', {target: '#status', swap: 'innerHTML'})"
    )
    row = page.locator('#sweepers tr[data-sweep="smoke-broken"]')
    await row.wait_for()
    text = await row.inner_text()
    assert "provider answered 503" in text
    assert "3000 ms" in text  # the tick's lag
    assert await row.get_attribute("class") == "failing"


@pytest.fixture
async def stopped_url(
    settings: Settings, shared_db: Database, clock: ManualClock, runtime: Runtime
) -> AsyncIterator[str]:
    """The app of a runtime built with PLATFORM_STOP on."""
    from app.web.app import create_app

    stopped = dataclasses.replace(
        settings, sweepers=dataclasses.replace(settings.sweepers, stop_all=True)
    )
    rt = assemble(stopped, clock, db=shared_db)
    try:
        async with serve_in_loop(create_app(stopped, rt, background=False)) as url:
            yield url
    finally:
        await rt.queue.aclose()


async def test_platform_stop_banner_shows_when_on(
    page: Any, stopped_url: str, tenant: Tenant
) -> None:
    await page.goto(f"{stopped_url}/login")
    assert await page.locator("#platform-stop").is_visible()
    await sign_in(page, stopped_url, tenant.email, tenant.password)
    banner = page.locator("#platform-stop")
    assert await banner.is_visible()
    assert "Platform stop is on" in await banner.inner_text()


async def test_sign_out(page: Any, live_url: str, tenant: Tenant) -> None:
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.click("header .logout button")
    await page.wait_for_url(f"{live_url}/login")
    await page.goto(f"{live_url}/")
    assert page.url.startswith(f"{live_url}/login")
    assert await page.locator("input[name=password]").count() == 1


async def test_api_key_created_shown_once_and_revoked(
    page: Any, live_url: str, tenant: Tenant
) -> None:
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.click('header a[href="/ui/workspace"]')
    await page.wait_for_url(f"{live_url}/ui/workspace")
    await page.fill("#create-key input[name=name]", "browser key")
    await page.click("#create-key button[type=submit]")
    key = await page.locator("#new-key").inner_text()
    assert key.startswith("swl_")
    await page.goto(f"{live_url}/ui/workspace")
    assert await page.locator("#new-key").count() == 0
    assert key not in await page.content()
    row = page.locator("#api-keys tr", has_text="browser key")
    await row.locator("button", has_text="Revoke").click()
    await page.wait_for_url(f"{live_url}/ui/workspace")
    assert "revoked" in await page.locator("#api-keys tr", has_text="browser key").inner_text()


async def test_member_sees_no_admin_forms(page: Any, live_url: str, tenant: Tenant) -> None:
    await sign_in(page, live_url, tenant.member_email, tenant.member_password)
    await page.goto(f"{live_url}/ui/workspace")
    assert await page.locator("#create-key").count() == 0
    assert await page.locator("#api-keys button", has_text="Revoke").count() == 0


async def test_htmx_requests_carry_the_csrf_token(page: Any, live_url: str, tenant: Tenant) -> None:
    """A page's htmx POSTs pass the CSRF check without a form field (``hx-headers`` on <body>)."""
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/workspace")
    async with page.expect_response("**/ui/workspace/ingest-token") as answer:
        await page.evaluate(
            "htmx.ajax('POST', '/ui/workspace/ingest-token', {target: '#ingest-token', swap: 'none'})"
        )
    assert (await answer.value).status == 200
    # The same request without the header is refused.
    status = await page.evaluate(
        "fetch('/ui/workspace/ingest-token', {method: 'POST'}).then(r => r.status)"
    )
    assert status == 403


async def test_status_refresh_after_the_session_ended_goes_to_sign_in(
    page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.goto(f"{live_url}/ui/operations")
    async with runtime.db.write() as uow:  # the session ends elsewhere (expired, signed out)
        await uow.session.execute(delete(UserSession))
    await page.evaluate(
        "htmx.ajax('GET', '/ui/partials/status', {target: '#status', swap: 'innerHTML'})"
    )
    await page.wait_for_url(f"{live_url}/login")
    assert await page.locator("#status").count() == 0
