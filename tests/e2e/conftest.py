"""Real-browser fixtures: the app served on a loopback port, driven by headless Chromium.

Chromium comes from Debian (``apt-get install chromium``); Playwright drives it without downloading
its own browser. Without Chromium these tests skip, unless ``REQUIRE_SERVICES=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.settings import Settings
from tests.factories import Tenant

CHROMIUM = next(
    (
        p
        for p in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "")
        if p and os.path.exists(p)
    ),
    "",
)


@pytest.fixture
async def live_url(settings: Settings, runtime: Runtime) -> AsyncIterator[str]:
    """The app on a free loopback port, sharing the test's runtime (no background workers)."""
    from app.web.app import create_app

    app = create_app(settings, runtime, background=False)
    async with serve_in_loop(app) as url:
        yield url


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    """One Chromium per test process: starting it costs a second or more on a busy machine, and
    every test works in a context of its own (``page`` below), which shares no cookies, storage
    or cache with another."""
    if not CHROMIUM:
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail("Chromium is required (apt-get install chromium)")
        pytest.skip("Chromium is not installed")
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context()
    pg = await context.new_page()
    try:
        yield pg
    finally:
        await context.close()


async def sign_in(page: Any, live_url: str, email: str, password: str) -> None:
    """Sign in through the real form and wait for the home page."""
    await page.goto(f"{live_url}/login")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", password)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{live_url}/")


@pytest.fixture
async def signed_in_page(page: Any, live_url: str, tenant: Tenant) -> Any:
    await sign_in(page, live_url, tenant.email, tenant.password)
    return page
