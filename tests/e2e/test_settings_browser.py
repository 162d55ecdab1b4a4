"""Workspace settings in a real headless Chromium, with no JSON typed: a secret stored and deleted
(its value never shown again, PL-3), and an outside provider configured from its form: a refused
form names the field by its label and keeps what was typed; saved, the credential is stored
encrypted and the page says only that one is stored."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.engines.funnels.outside.models import ProviderConfig
from app.platform.models import Secret
from app.runtime import Runtime
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_a_secret_is_stored_never_shown_and_deleted(
    signed_in_page: Any, live_url: str, runtime: Runtime
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/workspace")
    await page.click("#settings-nav >> text=Secrets")
    await page.fill("#secret-form input[name=name]", "google_sheets_api_key")
    await page.fill("#secret-form input[name=value]", "AIza-very-secret")
    await page.click("#secret-form button[type=submit]")
    assert "stored" in await page.locator("#notice").inner_text()
    table = await page.locator("#secret-table").inner_text()
    assert "google_sheets_api_key" in table
    assert "Google API key" in table
    assert "AIza-very-secret" not in await page.content()
    async with runtime.db.read() as s:
        [ciphertext] = list(await s.scalars(select(Secret.ciphertext)))
    assert b"AIza-very-secret" not in ciphertext

    # A bad name is refused by its label, the name kept.
    await page.fill("#secret-form input[name=name]", "no spaces allowed")
    await page.fill("#secret-form input[name=value]", "x")
    await page.click("#secret-form button[type=submit]")
    assert (await page.locator("#secret-error").inner_text()).startswith("Name")
    assert await page.locator("#secret-form input[name=name]").input_value() == "no spaces allowed"

    page.once("dialog", lambda dialog: dialog.accept())
    await page.click('tr[data-secret="google_sheets_api_key"] button')
    assert "deleted" in await page.locator("#notice").inner_text()
    assert "google_sheets_api_key" not in await page.locator("#secret-table").inner_text()


async def test_an_sms_provider_is_configured_from_its_form(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/workspace/providers")
    form = page.locator("#provider-form-sms")
    await form.locator("select[name=shape]").select_option("twilio")
    await form.locator("input[name=base_url]").fill("https://api.twilio.example")
    await form.locator("input[name=secret]").fill("twilio-auth-token")
    await form.locator("input[name=option_sender]").fill("+15005550006")
    await form.locator("button[type=submit]").click()
    error = await page.locator("#provider-error").inner_text()
    assert error.startswith("Account SID (Twilio): ")
    form = page.locator("#provider-form-sms")
    assert await form.locator("input[name=base_url]").input_value() == "https://api.twilio.example"
    assert await form.locator("input[name=option_sender]").input_value() == "+15005550006"
    assert await form.locator("select[name=shape]").input_value() == "twilio"

    await form.locator("input[name=secret]").fill("twilio-auth-token")
    await form.locator("input[name=option_account_sid]").fill("AC123")
    await form.locator("button[type=submit]").click()
    assert "provider saved" in await page.locator("#notice").inner_text()
    status = await page.locator("#status-sms").inner_text()
    assert "twilio" in status
    assert "credential stored" in status
    assert "twilio-auth-token" not in await page.content()
    async with runtime.db.read() as s:
        row = await s.scalar(
            select(ProviderConfig).where(ProviderConfig.workspace_id == tenant.workspace_id)
        )
    assert row is not None
    assert row.options["account_sid"] == "AC123"

    # Saved again with the credential left blank: the stored one is kept.
    form = page.locator("#provider-form-sms")
    await form.locator("input[name=option_sender]").fill("+15005550007")
    await form.locator("button[type=submit]").click()
    assert "credential stored" in await page.locator("#status-sms").inner_text()

    page.once("dialog", lambda dialog: dialog.accept())
    await page.click("#provider-sms form[action$='/remove'] button")
    assert "provider removed" in await page.locator("#notice").inner_text()
    assert "Not configured" in await page.locator("#status-sms").inner_text()
