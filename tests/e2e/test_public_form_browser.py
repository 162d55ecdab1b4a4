"""The hosted form page (FN-13) in a real browser, as a visitor without a session sees it: it
states its language, takes its look from a stylesheet (the pages' policy allows no inline style),
and shows no console error nor a serious or critical axe-core finding — filled in wrongly, right,
and for a form that does not exist."""

from __future__ import annotations

from typing import Any

import pytest

from app.engines.funnels.events.forms import FormField, create_form
from app.runtime import Runtime
from tests.e2e.page_errors import watch_errors
from tests.e2e.test_every_page_browser import AUDIT, audit_context
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def _hosted_form(runtime: Runtime, tenant: Tenant) -> str:
    async with runtime.db.write() as uow:
        form = await create_form(
            uow.session,
            tenant.workspace_id,
            name="Newsletter",
            fields=[FormField(key="first_name", label="First name", required=True)],
            now=runtime.clock.now(),
        )
        return form.public_id


async def _clean(page: Any, errors: list[str]) -> None:
    assert await page.locator("html").get_attribute("lang") == "en"
    assert await page.locator("style").count() == 0
    assert await page.locator("[style]").count() == 0
    assert await page.evaluate(AUDIT) == []
    assert errors == []


async def test_fn13_the_hosted_form_has_a_language_and_no_csp_error(
    browser: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    """FN-13: the hosted form page, its answer to a missing field and its thank-you page."""
    public_id = await _hosted_form(runtime, tenant)
    context = await audit_context(browser)
    try:
        page = await context.new_page()
        errors = watch_errors(page)
        response = await page.goto(f"{live_url}/t/f/{public_id}")
        assert response is not None
        assert response.status == 200
        # The stylesheet applied: the column is narrow, not the window's width.
        width = await page.evaluate("document.body.getBoundingClientRect().width")
        assert width < 600  # 32rem and its padding, in a 1280 px window
        await _clean(page, errors)

        # A required field left empty: the form again, its message (422 is the page's own
        # answer, not an error of the page).
        await page.fill("input[name=email]", "visitor@example.com")
        await page.evaluate("document.querySelector('input[name=first_name]').required = false")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        errors[:] = [e for e in errors if "422" not in e]
        assert "First name is required" in await page.locator("[role=alert]").inner_text()
        await _clean(page, errors)

        await page.fill("input[name=email]", "visitor@example.com")
        await page.fill("input[name=first_name]", "Vera")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        assert "Thank you" in await page.locator(".thanks").inner_text()
        await _clean(page, errors)

        response = await page.goto(f"{live_url}/t/f/no-such-form")
        assert response is not None
        assert response.status == 404
        errors[:] = [e for e in errors if "404" not in e]
        await _clean(page, errors)
    finally:
        await context.close()
