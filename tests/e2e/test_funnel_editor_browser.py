"""The funnel editor never throws an edit away: "Save and publish" publishes what the editor holds,
saved first, even when it was never saved on its own; a draft that does not parse is shown again and
nothing is published."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.engines.funnels.definitions.service import get_version
from app.runtime import Runtime
from tests.e2e.test_funnels_browser import FIXED, open_json
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_publish_saves_the_unsaved_edit_first(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels")
    await page.fill("#new-funnel input[name=name]", "Welcome")
    await page.click("#new-funnel button[type=submit]")
    await page.wait_for_selector("#draft-form")
    funnel_id = int(page.url.rstrip("/").rsplit("/", 1)[1].split("?")[0])

    # Broken JSON straight to publish: kept on screen, nothing published.
    await open_json(page)
    await page.fill("#definition", "{ not json")
    await page.click("#publish")
    assert "Not published" in await page.locator("#error").inner_text()
    assert await page.locator("#definition").input_value() == "{ not json"
    assert "Not published yet" in await page.locator("#versions").inner_text()

    # A valid edit, never saved on its own, and a new name: both are what version 1 holds.
    await open_json(page)
    await page.fill("#definition", json.dumps(FIXED))
    await page.fill("#draft-form input[name=name]", "Welcome v1")
    await page.click("#publish")
    assert "Published version 1" in await page.locator("#notice").inner_text()
    assert await page.locator("h1").inner_text() == "Welcome v1"
    async with runtime.db.read() as s:
        version = await get_version(s, tenant.workspace_id, funnel_id, 1)
    assert [n["id"] for n in version.definition["nodes"]] == [n["id"] for n in FIXED["nodes"]]
    assert "Welcome aboard" in json.dumps(version.definition)
