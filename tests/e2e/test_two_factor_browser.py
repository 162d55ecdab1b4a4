"""Two-factor sign-in in a real headless Chromium (issue 31, item 2): enrolment from the QR code
page (drawn locally, no script, no CSP violation), the recovery codes shown once, then a sign-in
that asks for the code before opening the session."""

from __future__ import annotations

from typing import Any

import pyotp
import pytest

from app.clock import ManualClock
from tests.e2e.page_errors import watch_errors
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_enrol_then_sign_in_with_a_code(
    signed_in_page: Any, live_url: str, tenant: Tenant, clock: ManualClock
) -> None:
    page = signed_in_page
    errors = watch_errors(page)
    await page.goto(f"{live_url}/ui/workspace")
    await page.click("#settings-nav >> text=Account security")
    await page.wait_for_url(f"{live_url}/ui/account/security")
    assert await page.locator("#two-factor-qr svg").is_visible()
    secret = (await page.locator("#two-factor-secret").inner_text()).strip()
    await page.fill("#two-factor-enrol input[name=code]", pyotp.TOTP(secret).at(clock.now()))
    await page.click("#two-factor-enrol button[type=submit]")
    codes = await page.locator("ul.recovery-codes li").all_inner_texts()
    assert len(codes) == 10
    await page.click("#recovery-codes-continue")
    await page.wait_for_url(f"{live_url}/ui/account/security")
    assert "10 of 10 recovery codes left" in await page.locator("#two-factor").inner_text()

    await page.click(".logout button")
    await page.wait_for_url(f"{live_url}/login")
    clock.advance(30)
    await page.fill("input[name=email]", tenant.email)
    await page.fill("input[name=password]", tenant.password)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{live_url}/login/two-factor")
    await page.fill(
        "input[name=code]", "000000" if pyotp.TOTP(secret).at(clock.now()) != "000000" else "111111"
    )
    await page.click("#two-factor-code button[type=submit]")
    assert "not right" in await page.locator("#two-factor-code .error").inner_text()
    await page.fill("input[name=code]", pyotp.TOTP(secret).at(clock.now()))
    await page.click("#two-factor-code button[type=submit]")
    await page.wait_for_url(f"{live_url}/")
    assert await page.locator(".topbar").is_visible()
    # The wrong code's page answers 401, which the browser logs; nothing else may go wrong.
    assert [e for e in errors if "status of 401" not in e] == []
