"""The editors keep unsaved edits from being lost (FN-79, AR-48): leaving the visual funnel
editor or the rule builder with edits asks first — a link of the dashboard with the page's own
question, closing or reloading with the browser's (its beforeunload) — and saving clears the question. A tag a step
names that does not exist yet is created from the step itself, and the funnel then publishes
(FN-80)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.funnels.definitions.service import get_version
from app.engines.funnels.reads import tag_names
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.e2e.test_rule_builder_browser import _shop
from tests.engines.adrules.factories import graph_server, settings, world
from tests.factories import Tenant

__all__ = ["graph_server", "settings", "world"]

pytestmark = pytest.mark.browser


class Dialogs:
    """The dialogs the page opened, answered as a person would (accept or dismiss)."""

    def __init__(self, page: Any) -> None:
        self.seen: list[tuple[str, str]] = []
        self.accept = False
        page.on("dialog", self._answer)

    async def _answer(self, dialog: Any) -> None:
        self.seen.append((dialog.type, dialog.message))
        if self.accept:
            await dialog.accept()
        else:
            await dialog.dismiss()


async def _new_funnel(page: Any, live_url: str, name: str) -> int:
    await page.goto(f"{live_url}/ui/funnels")
    await page.fill("#new-funnel input[name=name]", name)
    await page.click("#new-funnel button[type=submit]")
    await page.wait_for_selector("#draft-form")
    await page.wait_for_load_state("load")
    return int(page.url.rstrip("/").rsplit("/", 1)[1].split("?")[0])


# A beforeunload event as the browser sends it: whether the page called it off (the browser then
# asks the person whether to leave).
UNLOADING = """() => {
  const event = new Event("beforeunload", { cancelable: true });
  window.dispatchEvent(event);
  return event.defaultPrevented;
}"""


async def _guarded(page: Any) -> bool:
    return bool(await page.evaluate("window.sweeplineUnsaved && window.sweeplineUnsaved()"))


async def test_fn79_leaving_the_funnel_editor_with_edits_asks_and_saving_clears_it(
    signed_in_page: Any, live_url: str
) -> None:
    page = signed_in_page
    dialogs = Dialogs(page)
    funnel_id = await _new_funnel(page, live_url, "Guarded")
    editor = f"{live_url}/ui/funnels/{funnel_id}"

    # Untouched: a link leaves without a question.
    await page.click("nav >> text=Funnels")
    await page.wait_for_url(f"{live_url}/ui/funnels")
    assert dialogs.seen == []

    # A step added on the canvas (no key typed into the form): leaving asks; "stay" stays.
    await page.goto(editor)
    await page.wait_for_load_state("load")
    await page.select_option("#fe-kind", "wait")
    await page.click("#fe-add")
    await expect(page.locator("#fe-canvas .fe-node")).to_have_count(1)
    assert await _guarded(page)
    await page.click("nav >> text=Funnels")
    assert [kind for kind, _ in dialogs.seen] == ["confirm"]
    assert "not saved" in dialogs.seen[0][1]
    assert page.url.startswith(editor)
    # Closing, reloading or typing another address: the page asks the browser to ask.
    assert await page.evaluate(UNLOADING)

    # Saved: the same link leaves without a question.
    await page.click("#save")
    await page.wait_for_url(f"{editor}*")
    await page.wait_for_load_state("load")
    assert not await _guarded(page)
    assert not await page.evaluate(UNLOADING)
    await page.click("nav >> text=Funnels")
    await page.wait_for_url(f"{live_url}/ui/funnels")
    assert len(dialogs.seen) == 1


async def test_ar48_leaving_the_rule_builder_with_edits_asks_and_saving_clears_it(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    page = signed_in_page
    await _shop(runtime, tenant, world)
    dialogs = Dialogs(page)
    await page.goto(f"{live_url}/ui/adrules/rules/new")
    await page.wait_for_load_state("load")
    assert not await _guarded(page)

    await page.fill("#rule-form input[name=name]", "Guarded rule")
    await page.check("input[name=account_ids]")
    await page.click("nav >> text=Funnels")
    assert [kind for kind, _ in dialogs.seen] == ["confirm"]
    assert page.url.endswith("/ui/adrules/rules/new")

    # Answering "leave" leaves, without asking a second time.
    dialogs.accept = True
    await page.click("nav >> text=Funnels")
    await page.wait_for_url(f"{live_url}/ui/funnels")
    assert len(dialogs.seen) == 2

    # Saved, then left: no question.
    dialogs.accept = False
    await page.goto(f"{live_url}/ui/adrules/rules/new")
    await page.wait_for_load_state("load")
    await page.fill("#rule-form input[name=name]", "Saved rule")
    await page.check("input[name=account_ids]")
    await page.click("#save-rule")
    await page.wait_for_selector("#saved")
    await page.wait_for_load_state("load")
    await page.click("nav >> text=Funnels")
    await page.wait_for_url(f"{live_url}/ui/funnels")
    assert len(dialogs.seen) == 2


async def test_fn80_a_tag_created_from_its_step_lets_the_funnel_publish(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    funnel_id = await _new_funnel(page, live_url, "Tagging")
    await page.select_option("#fe-kind", "add_tag")
    await page.click("#fe-add")
    tag_input = page.locator("#fe-panel input[list=pb-tags]")
    await tag_input.fill("vip customers")
    create = page.locator("#fe-panel button.fe-create-name")
    await expect(create).to_have_text("Create tag \u201cvip customers\u201d")
    await expect(page.locator("#fe-status")).to_contain_text("problem")

    # A refusal is worded for a person and pinned on the field.
    await tag_input.fill("x" * 101)
    await create.click()
    await expect(page.locator("#fe-panel .field-error")).to_have_text(
        "Tag name: at most 100 characters."
    )
    await tag_input.fill("vip customers")
    await create.click()
    await expect(page.locator("#fe-status")).to_have_text("The unsaved graph is valid")
    await expect(create).to_be_hidden()
    assert await page.locator("#pb-tags option[value='vip customers']").count() == 1

    await page.click("#publish")
    await page.wait_for_selector("#notice")
    assert "Published version 1" in await page.locator("#notice").inner_text()
    async with runtime.db.read() as s:
        version = await get_version(s, tenant.workspace_id, funnel_id, 1)
    assert [n.get("tag") for n in version.definition["nodes"]] == ["vip customers"]


async def test_fn80_a_tag_created_from_a_conditions_predicate_exists_at_once(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    await _new_funnel(page, live_url, "Branching on a new tag")
    await page.select_option("#fe-kind", "condition")
    await page.click("#fe-add")
    await page.click("#fe-panel .pb-add")
    await page.locator("#fe-panel .pb-row select").first.select_option("has_tag")
    tag_input = page.locator("#fe-panel .pb-row input[list=pb-tags]")
    await tag_input.fill("returning buyers")
    create = page.locator("#fe-panel .pb-row button.fe-create-name")
    await expect(create).to_have_text("Create tag \u201creturning buyers\u201d")
    await create.click()
    await expect(create).to_be_hidden()
    assert await page.locator("#pb-tags option[value='returning buyers']").count() == 1
    async with runtime.db.read() as s:
        assert "returning buyers" in await tag_names(s, tenant.workspace_id)
