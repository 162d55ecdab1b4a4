"""The campaign composer and saved segments in a real headless Chromium (issue 36): compose a
campaign to a saved segment, preview it as a contact at desktop and phone width, send a test that
arrives at the SMTP server marked as one, confirm and send (FN-76, FN-77); save a segment from the
builder and use it in a funnel's trigger, whose use then blocks deleting it (FN-73 to FN-75)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update

from app.engines.funnels.campaigns.jobs import start_due
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.contacts.saved_segments import SegmentData, create_segment
from app.engines.funnels.definitions.service import create_funnel, parse_definition
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import Contact, Funnel
from app.integrations.mail import MailSender
from app.runtime import Runtime
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings
from tests.engines.funnels.factories import contact, replace_funnels_deps, setup_names
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def _vips(runtime: Runtime, ws: int) -> None:
    await setup_names(runtime, ws, tags=["vip"])
    await contact(runtime, ws, "ann@example.com", first_name="Ann", tags=["vip"])
    await contact(runtime, ws, "bob@example.com", first_name="Bob", tags=["vip"])
    carl = await contact(runtime, ws, "carl@example.com", first_name="Carl", tags=["vip"])
    await contact(runtime, ws, "dora@example.com", first_name="Dora")
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Contact).where(Contact.id == carl).values(suppressed={"email": "unsubscribed"})
        )


async def test_fn76_fn77_compose_preview_test_send_confirm_and_send(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    ws = tenant.workspace_id
    await _vips(runtime, ws)
    async with runtime.db.write() as uow:
        segment = await create_segment(
            uow.session,
            ws,
            SegmentData("VIPs", "", {"kind": "has_tag", "tag": "vip"}),
            runtime.clock.now(),
        )
        segment_id = segment.id
    with SmtpSink() as sink:
        mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="n@test.example")
        replace_funnels_deps(runtime, trial_mail=MailSender(mail))

        # Compose: a saved segment as the audience, subject, preheader, text and HTML.
        await page.goto(f"{live_url}/ui/funnels/campaigns?saved_segment={segment_id}")
        form = page.locator("#create-campaign")
        assert await form.locator("#saved-segment").input_value() == str(segment_id)
        await form.locator("input[name=name]").fill("Spring sale")
        await form.locator("input[name=subject]").fill("Hi {{first_name}}")
        await form.locator("input[name=preheader]").fill("20% off for {{first_name}}")
        await form.locator("textarea[name=body]").fill("Dear {{first_name}}, 20% off.")
        await form.locator("textarea[name=html]").fill(
            '<p style="font-family:sans-serif">Dear <b id="who">{{first_name}}</b>, 20% off.</p>'
        )
        await form.locator("button[type=submit]").click()
        await page.wait_for_selector("#edit-campaign")
        assert "VIPs" in await page.locator("#audience").inner_text()
        assert await page.locator("#status").inner_text() == "draft"

        # Preview as Ann, at desktop and phone width.
        await page.fill("#preview-email", "ann@example.com")
        await page.click("#preview-as button[type=submit]")
        await page.wait_for_selector("#preview-subject:text('Hi Ann')")
        assert "20% off for Ann" in await page.locator("#preview-preheader").inner_text()
        assert (await page.locator("#preview-text").text_content() or "").startswith(
            "Dear Ann, 20% off."
        )
        for frame_id, width in (("#preview-desktop", 600), ("#preview-phone", 375)):
            box = await page.locator(frame_id).bounding_box()
            assert box is not None
            assert round(box["width"]) == width
            who = page.frame_locator(frame_id).locator("#who")
            assert await who.inner_text() == "Ann"

        # A test to a colleague, through the SMTP server, marked and counted nowhere.
        await page.fill("#test-to", "boss@example.com")
        await page.click("#test-send button[type=submit]")
        await page.wait_for_selector("#notice:has-text('Test sent to boss@example.com')")
        [test] = sink.snapshot()
        raw = test.raw.decode()
        assert "Subject: [Test] Hi Ann" in raw
        assert "X-Sweepline-Test: 1" in raw
        assert "To: boss@example.com" in raw
        assert "List-Unsubscribe: <" in raw
        assert "/t/u/test-message>" in raw
        assert test.to == ["boss@example.com"]
        assert await page.locator('[data-counter="sent"]').inner_text() == "0"

        # Still editable: a new subject, saved.
        await page.fill("#edit-subject", "Hello {{first_name}}")
        await page.click("#edit-campaign button[type=submit]")
        await page.wait_for_selector("#notice:text('Saved')")
        assert await page.locator("#subject").inner_text() == "Hello {{first_name}}"

        # The review: three VIPs, one unsubscribed; nothing goes without the confirmation.
        assert await page.locator('[data-review="matched"]').inner_text() == "3"
        assert await page.locator("#will-send").inner_text() == "2"
        assert "unsubscribed" in await page.locator("#review-table").inner_text()
        await page.click("#send-button")  # the browser holds it back: the box is required
        assert await page.locator("#status").inner_text() == "draft"
        await page.check("#confirm-send")
        await page.click("#send-button")
        await page.wait_for_selector("#status:text('scheduled')")
        # Scheduled, not started: still editable, and the send can be moved.
        assert await page.locator("#send-button").inner_text() == "Reschedule"
        async with runtime.db.read() as s:
            campaign_id = int(await s.scalar(select(Campaign.id)) or 0)

        assert await start_due(runtime.context(), runtime.clock.now()) == [campaign_id]
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
        sent = sink.snapshot()[1:]
        assert sorted(m.to[0] for m in sent) == ["ann@example.com", "bob@example.com"]
        assert {m.subject for m in sent} == {"Hello Ann", "Hello Bob"}
        assert all("X-Sweepline-Test" not in m.headers for m in sent)
    await page.reload()
    assert await page.locator("#edit-campaign").count() == 0  # started: no longer editable
    assert await page.locator("#status").inner_text() == "done"
    assert await page.locator('[data-counter="sent"]').inner_text() == "2"


async def test_fn76_send_is_refused_without_the_confirmation(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    """The server holds the confirmation too (a form posted without the box ticked)."""
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/campaigns")
    form = page.locator("#create-campaign")
    await form.locator("input[name=name]").fill("Unconfirmed")
    await form.locator("input[name=subject]").fill("S")
    await form.locator("textarea[name=body]").fill("B")
    await form.locator("button[type=submit]").click()
    await page.wait_for_selector("#schedule")
    await page.evaluate("document.getElementById('confirm-send').removeAttribute('required')")
    await page.click("#send-button")
    await page.wait_for_selector("#schedule-error")
    assert "Confirm" in await page.locator("#schedule-error").inner_text()
    assert await page.locator("#status").inner_text() == "draft"


async def test_fn73_fn74_fn75_save_a_segment_use_it_in_a_funnel_trigger(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    ws = tenant.workspace_id
    await _vips(runtime, ws)

    # Build "has tag vip" in the rows, then save it under a name.
    await page.goto(f"{live_url}/ui/funnels/segments")
    await page.click("#segment-builder .pb-add")
    await page.locator("#segment-builder .pb-row select").first.select_option("has_tag")
    await page.locator("#segment-builder .pb-row input[type=text]").fill("vip")
    await page.wait_for_selector("#sb-count:text('3')")
    await page.fill("#segment-name", "VIPs")
    await page.fill("#segment-description", "Our best customers")
    await page.click("#save-segment button[type=submit]")
    await page.wait_for_selector("#saved-segments tr[data-segment]")
    row = page.locator("#saved-segments tr[data-segment]")
    assert "VIPs" in await row.inner_text()
    assert await row.locator(".segment-count").inner_text() == "3"
    segment_id = int(await row.get_attribute("data-segment") or 0)

    # A funnel that starts when a contact enters the saved segment.
    async with runtime.db.write() as uow:
        funnel = await create_funnel(
            uow.session,
            ws,
            "Welcome VIPs",
            parse_definition(
                {
                    "nodes": [{"kind": "add_tag", "id": "t", "tag": "vip", "entry": True}],
                    "triggers": [{"kind": "manual"}],
                }
            ),
            runtime.clock.now(),
        )
        funnel_id = funnel.id
    await page.goto(f"{live_url}/ui/funnels/{funnel_id}")
    await page.select_option("#fe-trigger-kind", "segment_enter")
    await page.click("#fe-add-trigger")
    trigger = page.locator(".fe-trigger").last
    await trigger.locator(".pb-add").click()
    await trigger.locator(".pb-row select").first.select_option("segment")
    await trigger.locator(".pb-row select").nth(1).select_option(label="VIPs")
    await page.click("#publish")
    await page.wait_for_load_state()
    async with runtime.db.read() as s:
        saved = await s.get(Funnel, funnel_id)
        assert saved is not None
        assert saved.current_version_id is not None
        [entered] = [t for t in saved.draft["triggers"] if t["kind"] == "segment_enter"]
    [reference] = entered["predicate"]["predicates"]
    assert reference["segment_id"] == segment_id
    vip = {"kind": "has_tag", "tag": "vip"}
    assert reference["predicate"] == {"kind": "all", "predicates": [vip]}

    # In use: deleting it is refused, naming the funnel.
    await page.goto(f"{live_url}/ui/funnels/segments")
    assert 'funnel "Welcome VIPs"' in await page.locator(".segment-users").inner_text()
    await page.click(f"tr[data-segment='{segment_id}'] button[type=submit]")
    await page.wait_for_selector("#segments-error")
    assert 'funnel "Welcome VIPs"' in await page.locator("#segments-error").inner_text()
    assert await page.locator("#saved-segments tr[data-segment]").count() == 1
