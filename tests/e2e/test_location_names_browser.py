"""A schedule's location reads by its name on the dashboard (RT-60), never as "location 2826":
also when the synced list of the provider's locations lacks the schedule's code (a partial sync,
or a schedule made from the shipped list before the first sync)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.ranktracking import locations
from app.engines.ranktracking.location_models import ProviderLocation
from app.runtime import Runtime
from tests.e2e.page_errors import watch_errors
from tests.engines.ranktracking.factories import make_schedule
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_rt60_schedule_page_and_overview_name_the_location(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    """RT-60: a schedule in 2826 (United Kingdom, from the shipped list) after a sync that stored
    another country only: its page, the overview and a keyword's page say "United Kingdom"."""
    page = signed_in_page
    errors = watch_errors(page)
    schedule = await make_schedule(runtime, tenant, name="UK positions", location_code=2826)
    async with runtime.db.write() as uow:
        uow.session.add(
            ProviderLocation(
                code=2840,
                name="United States",
                search_text=locations.search_text("United States"),
                country_iso="US",
                kind="Country",
                synced_at=runtime.clock.now(),
            )
        )

    await page.goto(f"{live_url}/ui/ranktracking/schedules/{schedule.id}")
    await expect(page.locator("#rt-location")).to_have_text("United Kingdom")
    assert "location 2826" not in await page.locator("main").inner_text()

    await page.goto(f"{live_url}/ui/ranktracking")
    row = page.locator("tr", has_text="UK positions")
    await expect(row).to_contain_text("United Kingdom")
    assert "2826" not in await row.inner_text()

    await page.goto(
        f"{live_url}/ui/ranktracking/schedules/{schedule.id}/keyword?keyword=red%20shoes"
    )
    await expect(page.locator("#rt-location")).to_contain_text("United Kingdom")
    assert errors == []
