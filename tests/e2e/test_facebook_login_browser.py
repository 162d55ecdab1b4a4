"""AR-29 Connect with Facebook in a real headless Chromium against the Graph simulator: the button
on the ad accounts page, the login dialog (the simulator's person consents), back to the app, the
ad accounts Meta lists picked, the connection shown with its expiry; at 375 px too."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from app.clock import ManualClock
from app.engines.adrules.deps import AdRulesDeps
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import graph_server, settings, world

__all__ = ["graph_server", "settings", "world"]

pytestmark = pytest.mark.browser


async def test_ar29_connect_with_facebook_and_pick_accounts(
    signed_in_page: Any, live_url: str, runtime: Runtime, world: GraphWorld, clock: ManualClock
) -> None:
    page = signed_in_page
    world.oauth.now = clock.now
    world.add_account("act_801", "Shop Berlin", currency="EUR", timezone_name="Europe/Berlin")
    world.add_account("act_802", "Shop Tokyo", currency="JPY", timezone_name="Asia/Tokyo")
    deps = runtime.resources.require(AdRulesDeps)
    assert deps.login is not None
    # The dialog sends the browser back to where this test serves the app.
    deps.login.app = dataclasses.replace(
        deps.login.app, redirect_url=f"{live_url}/ui/adrules/meta/callback"
    )

    await page.set_viewport_size({"width": 375, "height": 800})
    await page.goto(f"{live_url}/ui/adrules/accounts")
    assert await page.inner_text("#token-state") == "Not connected yet."
    await page.click("#connect-facebook")
    # Meta appends ``#_=_`` to its redirect; the browser keeps the fragment across ours.
    await page.wait_for_url(re.compile(re.escape(f"{live_url}/ui/adrules/accounts/pick")))
    assert await page.locator("input[name=account]").count() == 2
    overflow = await page.evaluate(
        "document.documentElement.scrollWidth > document.documentElement.clientWidth"
    )
    assert overflow is False
    await page.check("input[value=act_802]")
    await page.click("#save-pick")
    await page.wait_for_selector("#message")
    assert await page.locator("tr[data-meta-id=act_802] .badge.active").count() == 1
    assert await page.locator("tr[data-meta-id=act_801] .badge.active").count() == 0
    state = await page.inner_text("#token-state")
    assert "Connected with Facebook" in state
    assert "ads_read, ads_management" in state
    assert "expires" in state
    assert await page.inner_text("#connect-facebook") == "Reconnect with Facebook"
    assert world.state.calls["debug_token"] == 1
