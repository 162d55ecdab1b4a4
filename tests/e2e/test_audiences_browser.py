"""Audiences in a real headless Chromium, with no JSON typed: tags, lists and custom fields added
from their page (a refused key named by its label, what was typed kept); a segment built from
predicate rows with "all"/"any" and a live count (FN-10, the API's SQL compilation); the segment
handed to a new campaign as its audience."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.contacts.store import ContactData, create_contact
from app.runtime import Runtime
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_tags_lists_and_fields_are_added_from_their_page(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/contacts")
    await page.click("text=Tags, lists and fields")
    await page.fill("#add-tag input[name=name]", "vip")
    await page.click("#add-tag button")
    assert "vip" in await page.locator("#tag-table").inner_text()
    await page.fill("#add-list input[name=name]", "newsletter")
    await page.click("#add-list button")
    assert "newsletter" in await page.locator("#list-table").inner_text()

    await page.fill("#add-field input[name=key]", "9plan")
    await page.fill("#add-field input[name=label]", "Plan")
    await page.click("#add-field button")
    assert (await page.locator("#field-error").inner_text()).startswith("Key: ")
    assert await page.locator("#add-field input[name=key]").input_value() == "9plan"
    assert await page.locator("#add-field input[name=label]").input_value() == "Plan"
    await page.fill("#add-field input[name=key]", "plan")
    await page.select_option("#add-field select[name=type]", "text")
    await page.click("#add-field button")
    assert "plan" in await page.locator("#field-table").inner_text()


async def test_a_segment_built_from_rows_counts_live_and_becomes_a_campaigns_audience(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    page = signed_in_page
    async with runtime.db.write() as uow:
        for email, tags in (("ada@x.test", ["vip"]), ("bob@x.test", ["vip"]), ("carol@x.test", [])):
            await create_contact(
                uow.session,
                tenant.workspace_id,
                ContactData(email=email, tags=tags),
                runtime.clock.now(),
            )
    await page.goto(f"{live_url}/ui/funnels/segments")
    await expect(page.locator("#sb-count")).to_have_text("3")

    builder = page.locator("#segment-builder")
    await builder.locator(".pb-add").first.click()
    row = builder.locator(".pb-row").first
    await row.locator("select").first.select_option("has_tag")
    await builder.locator(".pb-row input[type=text]").first.fill("vip")
    await expect(page.locator("#sb-count")).to_have_text("2")
    assert "ada@x.test" in await page.locator("#sb-sample").inner_text()
    assert "carol@x.test" not in await page.locator("#sb-sample").inner_text()

    # vip OR e-mail contains carol.
    await builder.locator(".pb-group legend select").first.select_option("any")
    await builder.locator(".pb-add").first.click()
    second = builder.locator(".pb-row").nth(1)
    await second.locator("select").nth(2).select_option("contains")
    await builder.locator(".pb-row").nth(1).locator("input[type=text]").fill("carol")
    await expect(page.locator("#sb-count")).to_have_text("3")

    await page.click("#sb-campaign")
    await page.wait_for_url("**/ui/funnels/campaigns?segment=*")
    await expect(page.locator("#audience-count")).to_have_text("3")
    await page.fill("#create-campaign input[name=name]", "Spring")
    await page.fill("#create-campaign input[name=subject]", "Hello")
    await page.fill("#create-campaign textarea[name=body]", "Spring is here")
    await page.click("#create-campaign button[type=submit]")
    await page.wait_for_url("**/ui/funnels/campaigns/*")
    # The audience in words, not JSON; a draft's progress does not poll.
    assert await page.locator("#audience").inner_text() == "has tag vip or email contains 'carol'"
    assert await page.locator("#progress").get_attribute("hx-get") is None
    async with runtime.db.read() as s:
        campaign = await s.get(Campaign, int(page.url.rsplit("/", 1)[1]))
    assert campaign is not None
    assert campaign.audience == {
        "kind": "any",
        "predicates": [
            {"kind": "has_tag", "tag": "vip"},
            {"kind": "field", "field": "email", "op": "contains", "value": "carol"},
        ],
    }
