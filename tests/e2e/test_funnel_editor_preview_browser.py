"""The visual funnel editor in headless Chromium, with no JSON typed: a message step's live preview
rendered by the server for a contact picked by name (and again as the subject is typed); each box of
the canvas showing the latest version's report figures once runs exist (the report's numbers, as
the table beside it shows them); and the forms of a trigger's event filter, a wait's event filter
and re-entry at most once per N days, published as the API would take them. No console error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.definitions.service import get_version
from app.engines.funnels.events.claim.triggers import enroll
from app.runtime import Runtime
from tests.e2e.page_errors import watch_errors
from tests.engines.funnels.factories import (  # noqa: F401 - the Funnels engine and its SMTP sink
    Engine,
    email_node,
    engine,
    funnel_settings,
    graph,
    node,
    published,
    session_sink,
    sink,
)
from tests.factories import Tenant
from tests.harness.clock import manual_clock

pytestmark = pytest.mark.browser


def box(page: Any, node_id: str) -> Any:
    return page.locator(f'#fe-canvas .fe-node[data-node="{node_id}"]')


async def new_funnel(page: Any, live_url: str, name: str) -> int:
    await page.goto(f"{live_url}/ui/funnels")
    await page.fill("#new-funnel input[name=name]", name)
    await page.click("#new-funnel button[type=submit]")
    await page.wait_for_selector("#fe-editor:not([hidden])")
    return int(page.url.rstrip("/").rsplit("/", 1)[1].split("?")[0])


async def test_the_message_preview_renders_for_the_contact_picked_by_name(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    page = signed_in_page
    errors = watch_errors(page)
    async with runtime.db.write() as uow:
        for first, last in (("Ada", "Lovelace"), ("Grace", "Hopper")):
            await create_contact(
                uow.session,
                tenant.workspace_id,
                ContactData(email=f"{first.lower()}@example.com", first_name=first, last_name=last),
                runtime.clock.now(),
            )
    await new_funnel(page, live_url, "Welcome")
    await page.select_option("#fe-kind", label="Send email")
    await page.click("#fe-add")
    panel = page.locator("#fe-panel")
    await panel.get_by_label("Subject").fill("Hi {{first_name}}")
    await panel.locator("textarea").first.fill("Welcome aboard, {{first_name}} {{last_name}}.")

    # Found by name, not by id; rendered by the server with that contact's variables.
    await page.fill("#fe-preview-search", "grace")
    await page.wait_for_selector(
        "#fe-preview-contact option:has-text('Grace Hopper')", state="attached"
    )
    subject = page.locator('#fe-preview-out [data-part="subject"] pre')
    await subject.filter(has_text="Hi Grace").wait_for()
    text = await page.locator('#fe-preview-out [data-part="text"] pre').inner_text()
    assert text.startswith("Welcome aboard, Grace Hopper.")
    assert "Unsubscribe: " in text  # the footer a send adds, to the test page
    assert "/t/u/test-message" in text

    # It follows the typing, and another contact.
    await panel.get_by_label("Subject").fill("Hello {{first_name}}, still there?")
    await subject.filter(has_text="Hello Grace, still there?").wait_for()
    await page.fill("#fe-preview-search", "Lovelace")
    await subject.filter(has_text="Hello Ada, still there?").wait_for()
    assert "Ada Lovelace" in await page.locator("#fe-preview-contact").inner_text()

    # The preview keeps its contact when another step is selected and this one again.
    await page.select_option("#fe-kind", label="Wait")
    await page.click("#fe-add")
    assert await page.locator("#fe-preview").count() == 0
    await box(page, "send_email_1").click()
    await subject.filter(has_text="Hello Ada, still there?").wait_for()
    assert errors == []


async def test_the_canvas_shows_each_steps_report_figures_once_runs_exist(
    signed_in_page: Any,
    live_url: str,
    tenant: Tenant,
    runtime: Runtime,
    engine: Engine,  # noqa: F811 - the fixture imported above
) -> None:
    page = signed_in_page
    errors = watch_errors(page)
    ws = tenant.workspace_id
    funnel_id, version = await published(
        runtime,
        ws,
        graph(
            email_node("hello", next="w"),
            node("wait", "w", days=3, next="later"),
            email_node("later", subject="Still there?"),
            triggers=[{"kind": "manual"}],
        ),
    )
    async with runtime.db.write() as uow:
        for name in ("ann", "bob", "cat"):
            await create_contact(
                uow.session, ws, ContactData(email=f"{name}@example.com"), runtime.clock.now()
            )
        await enroll(uow.session, version, now=runtime.clock.now())
    await engine.drive()
    assert len(engine.sink.snapshot()) == 3

    await page.goto(f"{live_url}/ui/funnels/{funnel_id}")
    await page.wait_for_selector("#fe-editor:not([hidden])")
    hello = box(page, "hello")
    assert await hello.locator('[data-counts="people"]').text_content() == "3 in · 3 moved on"
    assert (
        await hello.locator('[data-counts="messages"]').text_content()
        == "3 sent · 0 opened · 0 clicked"
    )
    wait = box(page, "w")
    assert await wait.locator('[data-counts="people"]').text_content() == "3 in · 3 waiting"
    assert await wait.locator('[data-counts="messages"]').count() == 0
    assert await hello.locator("title").filter(has_text="Version 1: 3 entered").count() == 1
    # A message step nobody reached yet has sent nothing; a step only the draft has shows nothing.
    later = box(page, "later")
    assert await later.locator('[data-counts="people"]').text_content() == "0 in"
    assert (
        await later.locator('[data-counts="messages"]').text_content()
        == "0 sent · 0 opened · 0 clicked"
    )
    await page.select_option("#fe-kind", label="Join")
    await page.click("#fe-add")
    await box(page, "join_1").wait_for()
    assert await box(page, "join_1").locator(".fe-counts").count() == 0
    # The same figures as the report's table (one computation).
    row = page.locator('#report-table tr[data-node="hello"] td')
    assert [await row.nth(i).inner_text() for i in (2, 3, 4)] == ["3", "0", "0"]
    assert (await row.nth(6).inner_text()).startswith("3")
    # The runs table names each contact by e-mail (FN-81), not by id.
    runs = await page.locator("#runs").inner_text()
    assert {"ann@example.com", "bob@example.com", "cat@example.com"} <= set(runs.split())

    # Three days on, the runs went through the last step: it says they finished there (FN-81).
    manual_clock(runtime).advance(days=3, seconds=1)
    await engine.drive()
    await page.goto(f"{live_url}/ui/funnels/{funnel_id}")
    await page.wait_for_selector("#fe-editor:not([hidden])")
    later = box(page, "later")
    assert await later.locator('[data-counts="people"]').text_content() == "3 in · 3 finished"
    assert await box(page, "w").locator('[data-counts="people"]').text_content() == (
        "3 in · 3 moved on"
    )
    assert errors == []


async def test_filters_and_reentry_are_set_in_forms_and_published(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    page = signed_in_page
    errors = watch_errors(page)
    funnel_id = await new_funnel(page, live_url, "Upgrades")
    await page.select_option("#fe-kind", label="Wait")
    await page.click("#fe-add")
    panel = page.locator("#fe-panel")
    await panel.get_by_label("Days", exact=True).fill("3")
    await panel.get_by_label("End early on event").fill("purchase")
    wait_filter = panel.locator('.fe-event-filter[data-key="event_filter"]')
    await wait_filter.get_by_label("Test the event's properties").check()
    await wait_filter.get_by_label("Property").fill("total")
    await wait_filter.get_by_label("Operator").select_option("gt")
    await wait_filter.get_by_label("Value").fill("100")

    # A trigger on an event, filtered on its properties; its problem is shown on the trigger.
    await page.select_option("#fe-trigger-kind", label="An event is sent")
    await page.click("#fe-add-trigger")
    trigger = page.locator('#fe-triggers .fe-trigger[data-trigger="2"]')
    await trigger.get_by_label("Event name").fill("upgrade")
    await trigger.get_by_label("Test the event's properties").check()
    await trigger.locator(".fe-trigger-problems li").filter(has_text="event property").wait_for()
    await trigger.get_by_label("Property").fill("plan")
    await trigger.get_by_label("Value").fill("pro")

    await page.select_option("#fe-reentry", label="Again, but at most once every so many days")
    await page.fill("#fe-reentry-days", "14")
    await page.wait_for_selector("#valid")
    assert await trigger.locator(".fe-trigger-problems li").count() == 0

    held = json.loads(await page.locator("#definition").input_value())
    assert (held["settings"]["reentry"], held["settings"]["reentry_days"]) == (True, 14)
    assert held["triggers"][1] == {
        "kind": "api_event",
        "event": "upgrade",
        "filter": {
            "kind": "all",
            "predicates": [{"kind": "event", "property": "plan", "op": "eq", "value": "pro"}],
        },
    }
    assert held["nodes"][0]["event_filter"] == {
        "kind": "all",
        "predicates": [{"kind": "event", "property": "total", "op": "gt", "value": 100}],
    }

    await page.click("#publish")
    assert "Published version 1" in await page.locator("#notice").inner_text()
    async with runtime.db.read() as s:
        version = await get_version(s, tenant.workspace_id, funnel_id, 1)
    assert version.definition["settings"]["reentry_days"] == 14
    assert version.definition["triggers"][1]["filter"] == held["triggers"][1]["filter"]
    # The forms show the published choices again.
    assert await page.locator("#fe-reentry").input_value() == "days"
    assert await page.locator("#fe-reentry-days").input_value() == "14"
    assert errors == []
