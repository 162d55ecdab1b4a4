"""The visual funnel editor in a real headless Chromium, with no JSON typed: a four-step funnel built
on the canvas (steps added from the toolbar, configured in the side panel's forms, one exit
connected by dragging it onto a step, one step deleted), the validator's problems pinned on the
step they concern in plain words while editing, published, then a contact simulated (FN-21 … FN-26
checked by the same validator the API uses)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.definitions.service import get_version
from app.runtime import Runtime
from tests.factories import Tenant

pytestmark = pytest.mark.browser


def node(page: Any, node_id: str) -> Any:
    return page.locator(f'#fe-canvas .fe-node[data-node="{node_id}"]')


async def add_step(page: Any, label: str) -> None:
    await page.select_option("#fe-kind", label=label)
    await page.click("#fe-add")


async def graph(page: Any) -> dict[str, Any]:
    return dict(json.loads(await page.locator("#definition").input_value()))


async def drag(page: Any, source: Any, target: Any) -> None:
    a = await source.bounding_box()
    b = await target.bounding_box()
    await page.mouse.move(a["x"] + a["width"] / 2, a["y"] + a["height"] / 2)
    await page.mouse.down()
    await page.mouse.move(b["x"] + b["width"] / 2, b["y"] + 10, steps=8)
    await page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2, steps=4)
    await page.mouse.up()


async def test_four_step_funnel_built_on_the_canvas_published_and_simulated(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    page = signed_in_page
    async with runtime.db.write() as uow:
        await create_contact(
            uow.session,
            tenant.workspace_id,
            ContactData(email="ada@example.com", first_name="Ada"),
            runtime.clock.now(),
        )
    await page.goto(f"{live_url}/ui/funnels")
    await page.fill("#new-funnel input[name=name]", "Onboarding")
    await page.click("#new-funnel button[type=submit]")
    await page.wait_for_selector("#fe-editor:not([hidden])")
    funnel_id = int(page.url.rstrip("/").rsplit("/", 1)[1].split("?")[0])
    assert await page.locator("#advanced").get_attribute("open") is None

    # The first step starts runs; an empty e-mail is pinned with its problems, in the form's words.
    await add_step(page, "Send email")
    email = node(page, "send_email_1")
    await page.wait_for_selector('.fe-node[data-node="send_email_1"].invalid .fe-pin')
    pinned = await email.locator(".fe-pin title").text_content()
    assert "Step 'send_email_1' — Subject: enter text; it cannot be empty" in pinned
    assert "Step 'send_email_1' — Body: write the message" in pinned
    assert (
        "Step 'send_email_1' — Subject: enter text; it cannot be empty"
        in await page.locator("#fe-node-problems").inner_text()
    )
    assert "'subject'" not in await page.locator("#problems").inner_text()

    await page.locator("#fe-panel").get_by_label("Name", exact=True).fill("welcome")
    await page.locator("#fe-panel").get_by_label("Name", exact=True).press("Tab")
    await page.locator("#fe-panel").get_by_label("Subject").fill("Hi {{first_name}}")
    body = page.locator("#fe-panel textarea").first
    await body.fill("Welcome aboard, ")
    await page.locator("#fe-panel select").first.select_option("first_name")
    assert await body.input_value() == "Welcome aboard, {{first_name}}"
    await page.wait_for_selector('.fe-node[data-node="welcome"]:not(.invalid)')

    # Each new step follows the selected one.
    await add_step(page, "Wait")
    await page.locator("#fe-panel").get_by_label("Days", exact=True).fill("2")
    await add_step(page, "Condition")
    await page.click("#fe-panel .pb-add")
    await page.locator("#fe-panel .pb-row select").nth(1).select_option("email")
    await page.locator("#fe-panel .pb-row select").nth(2).select_option("contains")
    await page.locator("#fe-panel .pb-row input[type=text]").fill("@example.com")
    await add_step(page, "Goal")
    # A step added by mistake, deleted from its panel.
    await add_step(page, "Join")
    await page.wait_for_selector('.fe-node[data-node="join_1"]')
    await page.click("#fe-delete")
    await page.wait_for_selector('.fe-node[data-node="join_1"]', state="detached")

    # The condition's "no" exit is still open: pinned until it is dragged onto the goal.
    condition = node(page, "condition_1")
    await page.wait_for_selector('.fe-node[data-node="condition_1"].invalid')
    assert "A condition needs both a Yes and a No branch" in (
        await condition.locator(".fe-pin title").text_content()
    )
    await drag(page, condition.locator(".fe-port").nth(1), node(page, "goal_1"))
    await page.wait_for_selector("#valid")
    await page.wait_for_selector('.fe-node[data-node="condition_1"]:not(.invalid)')

    saved = await graph(page)
    by_id = {n["id"]: n for n in saved["nodes"]}
    assert list(by_id) == ["welcome", "wait_1", "condition_1", "goal_1"]
    assert by_id["welcome"]["entry"] is True
    assert by_id["welcome"]["next"] == "wait_1"
    assert by_id["wait_1"] == {"kind": "wait", "id": "wait_1", "days": 2, "next": "condition_1"}
    assert by_id["condition_1"]["yes"] == by_id["condition_1"]["no"] == "goal_1"
    assert by_id["condition_1"]["predicate"] == {
        "kind": "all",
        "predicates": [
            {"kind": "field", "field": "email", "op": "contains", "value": "@example.com"}
        ],
    }

    # Never saved on its own: publishing saves it first.
    await page.click("#publish")
    assert "Published version 1" in await page.locator("#notice").inner_text()
    async with runtime.db.read() as s:
        version = await get_version(s, tenant.workspace_id, funnel_id, 1)
    published = {n["id"]: n for n in version.definition["nodes"]}
    assert list(published) == list(by_id)
    assert published["condition_1"]["no"] == "goal_1"
    assert published["welcome"]["body"] == "Welcome aboard, {{first_name}}"
    # The layout the person made is kept in the browser: the canvas comes back as it was.
    assert await node(page, "goal_1").count() == 1

    await page.click("#simulate-link")
    await page.fill("#simulate input[name=email]", "ada@example.com")
    await page.select_option("#simulate select[name=source]", "published")
    await page.click("#simulate button[type=submit]")
    await page.wait_for_selector("#result")
    assert "Hi Ada" in await page.locator("#messages").inner_text()
    path = await page.locator("#path").inner_text()
    assert "condition_1" in path
    assert "goal_1" in path

    # A later edit on the canvas, saved, is shown beside version 1 field by field.
    await page.goto(f"{live_url}/ui/funnels/{funnel_id}")
    await node(page, "wait_1").click()
    await page.locator("#fe-panel").get_by_label("Days", exact=True).fill("5")
    await page.wait_for_selector("#valid")
    await page.click("#save")
    await page.wait_for_selector("#notice")
    await page.click("#compare-1")
    change = page.locator('.step-change[data-node="wait_1"]')
    assert await change.get_attribute("data-change") == "changed"
    assert await change.locator("td.before").inner_text() == "2"
    assert await change.locator("td.after").inner_text() == "5"
    assert await page.locator(".step-change").count() == 1


async def test_a_value_of_the_wrong_type_in_the_json_is_pinned_on_its_step_in_plain_words(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels")
    await page.fill("#new-funnel input[name=name]", "Typed")
    await page.click("#new-funnel button[type=submit]")
    await page.wait_for_selector("#fe-editor:not([hidden])")
    await add_step(page, "Wait")
    await page.locator("#advanced").evaluate("d => { d.open = true; }")
    text = (await page.locator("#definition").input_value()).replace('"days": 1', '"days": "two"')
    await page.fill("#definition", text)
    await page.wait_for_selector('.fe-node[data-node="wait_1"].invalid')
    message = await node(page, "wait_1").locator(".fe-pin title").text_content()
    assert message == (
        "Step 'wait_1' — Days: a whole number of days, 0 or more; a wait takes one of a "
        "duration, a date and time, a weekday or a date field"
    )
    assert "$.nodes" not in await page.locator("#problems").inner_text()
