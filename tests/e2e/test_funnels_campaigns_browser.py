"""The ingestion and campaign pages in a real headless Chromium: the event stream, hosted forms
(created in the dashboard, filled in as a visitor), campaigns (create, schedule, progress and
counters) and a funnel's simulator."""

from __future__ import annotations

from typing import Any

import pytest

from app.engines.funnels.campaigns.jobs import start_due
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.contacts.memberships import ensure_names
from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.definitions.service import create_funnel, parse_definition, publish
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import Tag
from app.runtime import Runtime
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings
from tests.engines.funnels.factories import settle
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_forms_and_event_stream(signed_in_page: Any, live_url: str, runtime: Runtime) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/forms")
    await page.fill("#create-form input[name=name]", "Newsletter")
    await page.fill("#create-form input[name=fields]", "first_name")
    await page.click("#create-form button[type=submit]")
    await page.wait_for_selector("tr[data-form]")
    assert "t/s.js" in await page.locator("#site-snippet textarea").input_value()
    hosted = await page.locator("tr[data-form] a").get_attribute("href")
    assert hosted is not None
    public_id = hosted.rsplit("/", 1)[1]
    # A visitor fills the hosted form in.
    await page.goto(f"{live_url}/t/f/{public_id}")
    await page.fill("input[name=email]", "visitor@example.com")
    await page.fill("input[name=first_name]", "Vera")
    await page.click("button[type=submit]")
    assert "Thank you" in await page.locator(".thanks").inner_text()
    await settle(runtime)
    await page.goto(f"{live_url}/ui/funnels/events")
    stream = page.locator("#events")
    assert await stream.locator('tr[data-event="form_submit"]').count() == 1
    assert "visitor@example.com" in await stream.inner_text()
    assert (
        await page.locator("#event-stream").get_attribute("hx-get") == "/ui/funnels/events/stream"
    )
    assert "recorded" in await page.locator("#inbound").inner_text()


async def test_bad_form_input_is_shown_not_lost(signed_in_page: Any, live_url: str) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/forms")
    await page.fill("#create-form input[name=name]", "Bad")
    await page.fill("#create-form input[name=fields]", "email")
    await page.click("#create-form button[type=submit]")
    assert "email" in await page.locator("#create-form .field-error").inner_text()


async def test_campaign_create_schedule_progress_counters(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    ws = tenant.workspace_id
    async with runtime.db.write() as uow:
        for i in range(3):
            await create_contact(
                uow.session, ws, ContactData(email=f"c{i}@example.com"), runtime.clock.now()
            )
    await page.goto(f"{live_url}/ui/funnels/campaigns")
    form = page.locator("#create-campaign")
    await form.locator("input[name=name]").fill("Spring sale")
    await form.locator("input[name=subject]").fill("Spring is here")
    await form.locator("textarea[name=body]").fill("Everything 20% off")
    await form.locator("button[type=submit]").click()
    await page.wait_for_selector("#schedule")
    assert await page.locator("#status").inner_text() == "draft"
    await page.check("#confirm-send")
    await page.click("#schedule button[type=submit]")  # send now
    await page.wait_for_selector("#status:text('scheduled')")
    campaign_id = int(page.url.rsplit("/", 1)[1])
    assert await start_due(runtime.context(), runtime.clock.now()) == [campaign_id]
    with SmtpSink() as sink:
        mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="n@test.example")
        pool = SmtpPool(mail, 2)
        sender = CampaignSender(
            runtime.db,
            pool,
            owner="ui-test",
            domain="test.example",
            signing=Tracking("http://sweepline.test", "campaign-test-secret"),
        )
        try:
            assert await send_until_done(sender, campaign_id, runtime.clock)
        finally:
            await pool.aclose()
        assert len(sink.snapshot()) == 3
    await page.reload()
    assert await page.locator("#status").inner_text() == "done"
    assert await page.locator('[data-counter="sent"]').inner_text() == "3"
    assert await page.locator("#share").inner_text() == "100.0%"
    await page.goto(f"{live_url}/ui/funnels/campaigns")
    assert "Spring sale" in await page.locator("#campaigns").inner_text()


async def test_simulator_page(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    ws = tenant.workspace_id
    definition = {
        "triggers": [{"kind": "manual"}],
        "nodes": [
            {
                "kind": "send_email",
                "id": "hi",
                "entry": True,
                "subject": "Hi {{first_name}}",
                "body": "Welcome",
                "next": "w",
            },
            {"kind": "wait", "id": "w", "days": 3, "hour": 9, "next": "bye"},
            {"kind": "send_email", "id": "bye", "subject": "Bye {{first_name}}", "body": "See you"},
        ],
    }
    async with runtime.db.write() as uow:
        await ensure_names(uow.session, Tag, ws, [])
        await create_contact(
            uow.session,
            ws,
            ContactData(email="ann@example.com", first_name="Ann"),
            runtime.clock.now(),
        )
        funnel = await create_funnel(
            uow.session, ws, "Welcome", parse_definition(definition), runtime.clock.now()
        )
        await publish(uow.session, ws, funnel.id, user_id=None, now=runtime.clock.now())
    await page.goto(f"{live_url}/ui/funnels/{funnel.id}/simulate")
    await page.fill("#simulate input[name=email]", "ann@example.com")
    await page.click("#simulate button[type=submit]")
    await page.wait_for_selector("#result")
    assert await page.locator("#outcome").inner_text() == "completed"
    rows = page.locator("#messages tbody tr")
    assert await rows.count() == 2
    assert "Bye Ann" in await rows.nth(1).inner_text()
    assert "2026-03-05 09:00" in await rows.nth(1).inner_text()
    await page.fill("#simulate input[name=email]", "nobody@example.com")
    await page.click("#simulate button[type=submit]")
    assert "No contact" in await page.locator(".field-error").inner_text()
