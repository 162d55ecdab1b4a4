"""Drafting a funnel with AI in a real browser (FN-34/FN-35): from the funnel list, describe the
journey, pick the trigger and channels, and the draft opens in the visual editor with the
drafting record and the sample simulation beside it; nothing is published. The AI provider is
the loopback simulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select

from app.engines.funnels.models import FunnelVersion
from app.integrations.http_guard import GUARD_RESOURCE, AddressGuard
from app.runtime import Runtime
from app.sandbox.ai import AiSandbox
from app.sandbox.base import start_simulator
from tests.e2e.page_errors import watch_errors
from tests.e2e.test_every_page_browser import AUDIT, AXE, OVERFLOW
from tests.engines.funnels.drafting.conftest import configure_ai
from tests.factories import Tenant

pytestmark = pytest.mark.browser


@pytest.fixture
def ai() -> Iterator[AiSandbox]:
    sandbox = AiSandbox()
    server = start_simulator(sandbox)
    yield sandbox
    server.stop()


async def test_fn35_draft_with_ai_opens_in_the_editor_unpublished(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime, ai: AiSandbox
) -> None:
    runtime.resources.put(GUARD_RESOURCE, AddressGuard(allow_private=True))
    await configure_ai(runtime, tenant.workspace_id, ai.url)
    page = signed_in_page
    await page.context.add_init_script(path=str(AXE))
    errors = watch_errors(page)
    await page.goto(f"{live_url}/ui/funnels")
    await page.click("#draft-with-ai")
    await page.wait_for_selector("#draft-ai-form")
    assert await page.evaluate(AUDIT) == []
    await page.set_viewport_size({"width": 375, "height": 700})
    width = await page.evaluate(OVERFLOW)
    assert width["scroll"] <= width["viewport"]
    await page.set_viewport_size({"width": 1280, "height": 800})
    await page.fill("#ai-description", "Neue Kontakte begrüßen, dann Tipps. sandbox:repair")
    await page.select_option("#ai-trigger", "contact_created")
    assert await page.is_checked("#ai-channel-email")
    await page.click("#ai-draft")
    await page.wait_for_selector("#ai-draft")
    assert "valid after repair rounds" in await page.locator("#notice").inner_text()
    assert await page.locator("#ai-outcome").inner_text() == "valid after repair rounds"
    assert await page.locator("#ai-rounds").inner_text() == "2"
    assert ai.url in await page.locator("#ai-endpoint").inner_text()
    assert await page.locator("#ai-model").inner_text() == "gpt-4o-mini"
    assert await page.locator("#ai-sim-table tbody tr").count() == 20
    assert "20 of 20 entered" in await page.locator("#ai-sim-summary").inner_text()
    # The visual editor holds the drafted steps, valid, and nothing is published.
    await page.wait_for_selector("#fe-editor:not([hidden])")
    assert await page.locator("#valid").count() == 1
    assert "Not published yet" in await page.locator("#versions").inner_text()
    assert await page.evaluate(AUDIT) == []
    # The record and the simulation fit a phone's width (wide tables scroll in their card).
    await page.set_viewport_size({"width": 375, "height": 700})
    width = await page.evaluate(OVERFLOW)
    assert width["scroll"] <= width["viewport"]
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(FunnelVersion)) == 0
    assert errors == []
