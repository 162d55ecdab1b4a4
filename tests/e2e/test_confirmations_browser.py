"""Small dashboard points in a real headless Chromium: removing a person from the organisation and
stopping a campaign ask first, and a refused question changes nothing (PL-18, FN-82); the rule
builder offers cooldowns by duration, shortest first, not sorted as text (AR-50)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.engines.adrules.catalogue import COOLDOWN_LABELS, COOLDOWNS
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.platform.models import User
from app.runtime import Runtime
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_pl18_removing_a_person_asks_first(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/organisation")
    row = page.locator("#people tr", has_text=tenant.member_email)
    questions: list[str] = []

    async def refuse(dialog: Any) -> None:
        questions.append(dialog.message)
        await dialog.dismiss()

    page.once("dialog", refuse)
    await row.locator("button", has_text="Remove").click()
    await page.wait_for_timeout(300)  # a refused dialog sends nothing: give it time to have
    assert len(questions) == 1
    assert tenant.member_email in questions[0]
    async with runtime.db.read() as s:
        assert await s.scalar(select(User.id).where(User.email == tenant.member_email))
    assert tenant.member_email in await page.locator("#people").inner_text()

    page.once("dialog", lambda dialog: dialog.accept())
    async with page.expect_navigation():
        await row.locator("button", has_text="Remove").click()
    assert tenant.member_email not in await page.locator("#people").inner_text()


async def test_fn82_stopping_a_campaign_asks_first(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    async with runtime.db.write() as uow:
        campaign = await create_campaign(
            uow.session,
            tenant.workspace_id,
            CampaignData(name="Spring", subject="Hello", body="Spring is here"),
            runtime.clock.now(),
        )
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/campaigns/{campaign.id}")
    questions: list[str] = []

    async def refuse(dialog: Any) -> None:
        questions.append(dialog.message)
        await dialog.dismiss()

    page.once("dialog", refuse)
    await page.click("#cancel button")
    await page.wait_for_timeout(300)  # a refused dialog sends nothing: give it time to have
    assert questions == ["Cancel this campaign? It will not be sent."]
    async with runtime.db.read() as s:
        assert await s.scalar(select(Campaign.status).where(Campaign.id == campaign.id)) == "draft"

    page.once("dialog", lambda dialog: dialog.accept())
    async with page.expect_navigation():
        await page.click("#cancel button")
    async with runtime.db.read() as s:
        assert (
            await s.scalar(select(Campaign.status).where(Campaign.id == campaign.id)) == "cancelled"
        )


async def test_ar50_cooldowns_are_offered_shortest_first(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/adrules/rules/new")
    cooldown = page.locator('[data-path="tasks[0].cooldown"]')
    labels = await cooldown.locator("option").all_inner_texts()
    values = await cooldown.locator("option").evaluate_all("os => os.map(o => o.value)")
    assert labels[:4] == ["15 minutes", "30 minutes", "1 hour", "2 hours"]
    assert labels == [COOLDOWN_LABELS[c] for c in COOLDOWNS]
    assert values == list(COOLDOWNS)
    assert await cooldown.input_value() == "1h"
