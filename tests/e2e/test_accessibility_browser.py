"""The shell's accessibility in a real browser: the skip link, the phone menu, a visible focus ring,
and a live-updating form (the position-tracking wizard) typed into quickly without a console error."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from tests.e2e.page_errors import watch_errors

pytestmark = pytest.mark.browser


async def test_skip_link_is_the_first_stop_and_moves_to_the_content(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/adrules")
    await page.keyboard.press("Tab")
    skip = page.locator(".skip-link")
    await expect(skip).to_be_focused()
    assert await skip.is_visible()  # shown while focused, for sighted keyboard users
    await page.keyboard.press("Enter")
    await expect(page.locator("main#main")).to_be_focused()
    # The next tab stop is inside the content, past the navigation.
    await page.keyboard.press("Tab")
    inside = await page.evaluate("document.querySelector('main').contains(document.activeElement)")
    assert inside


async def test_focus_is_visible(signed_in_page: Any, live_url: str) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/adrules")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")  # the brand link
    outline = await page.evaluate(
        "(() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, parseFloat(s.outlineWidth)]; })()"
    )
    assert outline[0] != "none"
    assert outline[1] >= 2


async def test_navigation_collapses_into_a_menu_on_a_phone(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    await page.set_viewport_size({"width": 375, "height": 700})
    await page.goto(f"{live_url}/")
    nav = page.locator("nav[aria-label=Main]")
    toggle = page.locator(".menu-toggle")
    await expect(nav).to_be_hidden()
    assert await toggle.get_attribute("aria-expanded") == "false"
    await toggle.click()
    await expect(nav).to_be_visible()
    assert await toggle.get_attribute("aria-expanded") == "true"
    await nav.locator("a", has_text="Funnels").click()
    await page.wait_for_url(f"{live_url}/ui/funnels")
    # On a desktop the menu is always open and the toggle is not shown.
    await page.set_viewport_size({"width": 1280, "height": 800})
    await expect(page.locator("nav[aria-label=Main]")).to_be_visible()
    await expect(page.locator(".menu-toggle")).to_be_hidden()


async def test_typing_into_the_schedule_wizard_logs_no_error(
    signed_in_page: Any, live_url: str
) -> None:
    """Each keystroke asks for a new estimate; the superseded requests are dropped quietly."""
    page = signed_in_page
    errors = watch_errors(page)
    await page.goto(f"{live_url}/ui/ranktracking/new")
    await page.locator("input[name=name]").press_sequentially(
        "Gear", delay=410
    )  # near the debounce
    await page.locator("input[name=name]").press_sequentially(" positions, typed quickly", delay=15)
    await page.locator("textarea[name=keywords]").press_sequentially(
        "trail shoes\nrain jacket\nhiking boots", delay=15
    )
    await page.locator("input[name=domain]").press_sequentially("example.com", delay=15)
    await page.wait_for_load_state("networkidle")
    await expect(page.locator("#rt-estimate")).to_contain_text("Estimate")
    assert errors == []


async def test_form_errors_name_the_label_and_keep_what_was_typed(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/forms")
    await page.fill("#create-form input[name=name]", "Sign-up")
    await page.fill("#create-form input[name=fields]", "first_name, email")
    await page.fill("#create-form input[name=add_tag]", "newsletter")
    await page.click("#create-form button[type=submit]")
    error = await page.locator("#create-form .field-error").inner_text()
    # The label, then which entry of the list in words, never a request path (fields[1].key).
    assert error.startswith("Fields (field 2): ")
    assert "[" not in error
    assert await page.input_value("#create-form input[name=name]") == "Sign-up"
    assert await page.input_value("#create-form input[name=fields]") == "first_name, email"
    assert await page.input_value("#create-form input[name=add_tag]") == "newsletter"

    await page.goto(f"{live_url}/ui/funnels/campaigns")
    await page.fill("#create-campaign input[name=name]", "Autumn")
    await page.fill("#create-campaign input[name=subject]", "New trails")
    await page.fill("#create-campaign textarea[name=body]", "Hello {{ first_name }}")
    await page.fill("#create-campaign input[name=rate_per_minute]", "fast")
    await page.click("#create-campaign button[type=submit]")
    error = await page.locator("#create-campaign .field-error").inner_text()
    assert error.startswith("Messages per minute: ")
    assert await page.input_value("#create-campaign input[name=name]") == "Autumn"
    assert (
        await page.input_value("#create-campaign textarea[name=body]") == "Hello {{ first_name }}"
    )
    assert await page.input_value("#create-campaign input[name=rate_per_minute]") == "fast"

    await page.goto(f"{live_url}/ui/ranktracking/lists")
    await page.fill("#rt-new-list input[name=name]", "   ")  # passes `required`, not the server
    await page.fill("#rt-new-list textarea[name=keywords]", "trail shoes")
    await page.click("#rt-new-list button[type=submit]")
    assert "Name:" in await page.locator(".card.error").inner_text()
    assert await page.input_value("#rt-new-list textarea[name=keywords]") == "trail shoes"
