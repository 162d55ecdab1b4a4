"""A refused setting is said next to it, in plain words, in the two builders where people type
settings (platform spec PL-16): a funnel step's setting in the visual editor (from the editor's
live check) and a field of the rank-tracking schedule wizard (after the form is sent). No
console error."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from tests.e2e.page_errors import watch_errors
from tests.e2e.test_funnel_editor_preview_browser import new_funnel
from tests.engines.ranktracking.factories import DOMAIN

pytestmark = pytest.mark.browser


async def test_a_refused_step_setting_is_said_next_to_it_pl16(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    errors = watch_errors(page)
    await new_funnel(page, live_url, "Plain words")
    await page.select_option("#fe-kind", label="Wait")
    await page.click("#fe-add")
    panel = page.locator("#fe-panel")
    await panel.get_by_label("Minutes", exact=True).fill("-5")

    said = panel.locator('.fe-field[data-fe-key="minutes"] .field-error')
    await expect(said).to_have_text("Step 'wait_1' — Minutes: a whole number of minutes, 0 or more")
    minutes = panel.get_by_label("Minutes", exact=True)
    await expect(minutes).to_have_attribute("aria-invalid", "true")
    assert await minutes.get_attribute("aria-describedby") == await said.get_attribute("id")

    # Fixed, the message goes.
    await minutes.fill("30")
    await expect(said).to_have_count(0)
    await expect(minutes).not_to_have_attribute("aria-invalid", "true")
    assert errors == [], "\n".join(errors)


async def test_a_refused_wizard_field_is_said_next_to_it_pl16(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    errors = watch_errors(page)
    await page.goto(f"{live_url}/ui/ranktracking/new")
    await page.fill("input[name=name]", "Plain words")
    await page.check("input[name=source][value=selection]")
    await page.fill("textarea[name=keywords]", "trail shoes")
    await page.fill("input[name=domain]", DOMAIN)
    await page.fill("input[name=monthly_cap_eur]", "1")
    await page.press("input[name=monthly_cap_eur]", "Tab")
    # The form is sent once the live estimate has settled (not cut off by the page leaving).
    await expect(page.locator("#rt-estimate")).to_contain_text("at least 5 EUR")
    await page.wait_for_load_state("networkidle")
    await page.click("#rt-wizard button[type=submit]")

    await page.wait_for_load_state("networkidle")
    said = page.locator("#rt-err-monthly_cap_eur")
    await expect(said).to_have_text(
        "Monthly cap in EUR: a monthly cap is at least 5 EUR (omit it for no cap)"
    )
    cap = page.locator("input[name=monthly_cap_eur]")
    await expect(cap).to_have_attribute("aria-invalid", "true")
    await expect(cap).to_have_attribute("aria-describedby", "rt-err-monthly_cap_eur")
    # Next to the field: the message follows the cap's label in the form.
    assert (
        await page.locator(
            "label:has(input[name=monthly_cap_eur]) + #rt-err-monthly_cap_eur"
        ).count()
        == 1
    )
    # By design: the refused form answers 422 (the browser logs the status), and the live
    # estimate replaces its own request still in flight when the form changes again
    # (``hx-sync="this:replace"``: an abort htmx reports). Nothing else.
    by_design = (
        "status of 422",
        "htmx:sendAbort",
        "htmx:afterRequest",
        "/estimate net::ERR_ABORTED",
    )
    others = [e for e in errors if not any(d in e for d in by_design)]
    assert others == [], "\n".join(others)
