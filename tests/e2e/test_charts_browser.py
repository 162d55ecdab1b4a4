"""The shared charts (static/charts.js over the vendored uPlot) in a real headless Chromium: the
operations page charts the workspace's campaign messages sent per hour, and a campaign's page its
sends and delivery reports over time, from the rows the sender and the reports write."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.funnels.campaigns.models import CampaignEvent, Recipient
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.contacts.store import ContactData, create_contact
from app.runtime import Runtime
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_campaign_sends_are_charted_on_operations_and_the_campaign_page(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        campaign = await create_campaign(
            uow.session,
            tenant.workspace_id,
            CampaignData(name="Spring", subject="Hello", body="Spring is here"),
            now,
        )
        for seq in range(6):
            contact = await create_contact(
                uow.session, tenant.workspace_id, ContactData(email=f"c{seq}@x.test"), now
            )
            sent_at = now - timedelta(hours=3 if seq < 4 else 1)
            uow.session.add(
                Recipient(
                    campaign_id=campaign.id,
                    seq=seq,
                    contact_id=contact.id,
                    status="sent",
                    sent_at=sent_at,
                )
            )
            if seq < 3:
                uow.session.add(
                    CampaignEvent(
                        campaign_id=campaign.id,
                        seq=seq,
                        kind="delivered",
                        at=sent_at + timedelta(minutes=5),
                    )
                )
    page = signed_in_page
    await page.goto(f"{live_url}/ui/operations")
    await expect(page.locator("#sends-chart canvas")).to_have_count(1)
    assert "sent" in await page.locator("#sends-chart .u-legend").inner_text()
    assert "No rule ran" in await page.locator("#activity-charts").inner_text()
    # Refreshed in place, the chart is drawn again.
    async with page.expect_response("**/ui/partials/activity"):
        await page.evaluate("htmx.ajax('GET', '/ui/partials/activity', '#activity')")
    await expect(page.locator("#sends-chart canvas")).to_have_count(1)
    assert "sent" in await page.locator("#sends-chart .u-legend").inner_text()

    await page.goto(f"{live_url}/ui/funnels/campaigns/{campaign.id}")
    await expect(page.locator("#delivery-chart canvas")).to_have_count(1)
    legend = await page.locator("#delivery-chart .u-legend").inner_text()
    assert "sent" in legend
    assert "delivered" in legend
