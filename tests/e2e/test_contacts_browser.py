"""Contacts in the browser, with no JSON typed: add one with tags, lists and a custom field, see a
bad value named by its label with the form kept, edit it, and enrol it in a published funnel."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from sqlalchemy import select

from app.engines.funnels.contacts.fields import define_field
from app.engines.funnels.contacts.memberships import ensure_names
from app.engines.funnels.definitions.service import create_funnel, parse_definition, publish
from app.engines.funnels.models import Contact, Run, Tag
from app.runtime import Runtime
from tests.e2e.test_funnels_browser import FIXED
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_add_edit_and_enrol_a_contact(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        s = uow.session
        await define_field(s, tenant.workspace_id, "company", "text", "Company")
        await define_field(s, tenant.workspace_id, "seats", "number", "Seats")
        await ensure_names(s, Tag, tenant.workspace_id, ["vip"])
        funnel = await create_funnel(
            s, tenant.workspace_id, "Welcome", parse_definition(FIXED), now
        )
        await publish(s, tenant.workspace_id, funnel.id, user_id=None, now=now)
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/contacts")
    form = page.locator("#add-contact")
    await form.locator("input[name=email]").fill("Ada@Example.com")
    await form.locator("input[name=first_name]").fill("Ada")
    await form.locator("input[name=timezone]").fill("Europe/London")
    await form.locator("input[name=tags]").fill("vip, beta")
    await form.locator("input[name=lists]").fill("Newsletter")
    await form.get_by_label("Company").fill("Analytical Engines")
    await form.get_by_label("Seats").fill("twelve")
    await form.locator("button[type=submit]").click()
    # Named by its label, and everything typed is still there.
    await expect(page.locator("#add-error")).to_have_text("Seats: must be a number")
    assert await form.get_by_label("Company").input_value() == "Analytical Engines"
    assert await form.locator("input[name=tags]").input_value() == "vip, beta"
    await form.get_by_label("Seats").fill("12")
    await form.locator("button[type=submit]").click()
    await expect(page.locator("#notice")).to_have_text("Contact added")
    async with runtime.db.read() as reading:
        contact = await reading.scalar(select(Contact).where(Contact.email == "ada@example.com"))
    assert contact is not None
    assert contact.fields == {"company": "Analytical Engines", "seats": 12}
    assert contact.timezone == "Europe/London"
    page_text = await page.locator("main").inner_text()
    assert "beta, vip" in page_text or "vip, beta" in page_text

    # Edit: a tag dropped, a list added, the field changed.
    edit = page.locator("#edit-contact")
    await edit.locator("input[name=tags]").fill("vip")
    await edit.locator("input[name=lists]").fill("Newsletter, Customers")
    await edit.get_by_label("Company").fill("Difference Engines")
    await edit.locator("button[type=submit]").click()
    await expect(page.locator("#notice")).to_have_text("Contact saved")
    assert await edit.locator("input[name=tags]").input_value() == "vip"
    assert "Customers" in await edit.locator("input[name=lists]").input_value()
    assert await edit.get_by_label("Company").input_value() == "Difference Engines"

    # Enrol in the published funnel: a run starts and is on the timeline.
    await page.select_option("#enrol-contact select[name=funnel_id]", label="Welcome")
    await page.click("#enrol-contact button[type=submit]")
    await expect(page.locator("#notice")).to_have_text("Entered “Welcome”")
    async with runtime.db.read() as reading:
        runs = list(await reading.scalars(select(Run).where(Run.contact_id == contact.id)))
    assert len(runs) == 1
    await page.click("#enrol-contact button[type=submit]")
    await expect(page.locator("#notice")).to_contain_text("Not entered")
