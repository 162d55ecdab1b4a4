from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import sign_in
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_sign_in_and_see_home(page: Any, live_url: str, tenant: Tenant) -> None:
    await sign_in(page, live_url, tenant.email, tenant.password)
    assert await page.locator("h1").inner_text() == "Acme main"
    assert await page.locator("#sweepers").count() == 1
    assert "Queued" in await page.locator("#queue-depth").inner_text()


async def test_wrong_password_stays_on_sign_in(page: Any, live_url: str, tenant: Tenant) -> None:
    await page.goto(f"{live_url}/login")
    await page.fill("input[name=email]", tenant.email)
    await page.fill("input[name=password]", "wrong password")
    await page.click("button[type=submit]")
    assert "Wrong e-mail or password" in await page.locator(".error").inner_text()
