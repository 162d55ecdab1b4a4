"""The ad-rule builder in a real browser, with no JSON typed: a template opened in the builder, its
thresholds changed in condition rows, saved, previewed on an account, switched on, and its first
run read in the rule log. Also the builder's own parts: conditions added and removed with AND/OR,
action fields per type with the live name preview, the weekly grid, errors pinned on fields and
worded for people (PL-16)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from playwright.async_api import expect
from sqlalchemy import select

from app.engines.adrules import rule_tasks, rule_views
from app.engines.adrules.claim.sweep import DISPATCH_SWEEP
from app.engines.adrules.models import Batch, Rule
from app.engines.adrules.schemas import IncreaseBudget
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.conftest import eventually
from tests.engines.adrules.factories import (
    TOKEN,
    create_account,
    graph_server,
    settings,
    store_token,
    world,
)
from tests.factories import Tenant

__all__ = ["graph_server", "settings", "world"]

pytestmark = pytest.mark.browser


async def _shop(runtime: Runtime, tenant: Tenant, world: GraphWorld) -> int:
    world.add_account("act_501", "Shop Berlin", currency="EUR")
    world.grant(TOKEN, "act_501")
    world.add_campaigns("act_501", 3)
    await store_token(runtime, tenant.workspace_id, TOKEN)
    account = await create_account(
        runtime, workspace_id=tenant.workspace_id, meta_id="act_501", name="Shop Berlin"
    )
    return account.id


async def _only_rule(runtime: Runtime, workspace_id: int) -> rule_views.RuleView:
    async with runtime.db.read() as s:
        rule_id = await s.scalar(select(Rule.id).where(Rule.workspace_id == workspace_id))
        assert rule_id is not None
        return await rule_views.view_rule(s, workspace_id=workspace_id, rule_id=rule_id)


async def test_template_with_changed_thresholds_preview_activate_first_run(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    page = signed_in_page
    await _shop(runtime, tenant, world)

    # The rules page leads to the templates; a template opens in the builder, unsaved.
    await page.goto(f"{live_url}/ui/adrules")
    await page.click("#from-template")
    await page.click("#open-pause_losers")
    await page.wait_for_url("**/ui/adrules/rules/new?template=pause_losers")
    task = page.locator("fieldset.task").first
    roas = task.locator('[data-path="tasks[0].conditions[0].value"]')
    spend = task.locator('[data-path="tasks[0].conditions[1].value"]')
    assert await roas.input_value() == "1.0"
    assert await spend.input_value() == "50"
    # Thresholds edited in the rows; the account ticked; a name of our own.
    await roas.fill("1.5")
    await spend.fill("80")
    await page.fill("#rule-form input[name=name]", "Pause losers below 1.5")
    await page.check("input[name=account_ids]")
    await page.click("#save-rule")
    await page.wait_for_selector("#saved")
    view = await _only_rule(runtime, tenant.workspace_id)
    conditions = rule_tasks.task_in(view.tasks[0]).conditions
    assert [c.value for c in conditions] == [Decimal("1.5"), Decimal(80)]  # type: ignore[union-attr]
    assert view.rule.status == "draft"

    # Preview from the editor: what it would do, reading only.
    await page.click("#preview-rule")
    await page.click("#rule-preview-form button[type=submit]")
    await page.wait_for_selector("#preview")
    assert await page.locator("#preview .preview-row").count() == 3
    assert world.updates == []

    # Switch it on from the editor, and let the dispatcher run it.
    await page.goto(f"{live_url}/ui/adrules/rules/{view.rule.id}")
    await page.select_option("select[name=status]", "active")
    await page.click("#save-rule")
    await page.wait_for_selector("#saved")
    assert "active" in await page.locator("#rule-state").inner_text()
    runtime.start_workers()
    await DISPATCH_SWEEP.run(runtime.context(), runtime.clock.now())

    async def finished() -> bool:
        async with runtime.db.read() as s:
            batch = await s.scalar(select(Batch).where(Batch.rule_id == view.rule.id))
            return batch is not None and batch.finished_at is not None

    await eventually(finished, timeout=30)
    await page.click("#rule-runs")
    row = page.locator("#batches tbody tr[data-batch]").first
    await expect(row).to_contain_text("Pause losers below 1.5")
    await expect(row).to_contain_text("Shop Berlin")
    await row.locator("a[href^='/ui/adrules/log/']").click()  # the run, not the rule
    await page.wait_for_selector("#batch-summary")
    assert await page.locator("tr.record").count() == 3


async def test_builder_rows_actions_preview_grid_and_pinned_errors(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    page = signed_in_page
    await _shop(runtime, tenant, world)
    await page.goto(f"{live_url}/ui/adrules/rules/new")
    await page.fill("#rule-form input[name=name]", "Builder rule")
    await page.check("input[name=account_ids]")
    task = page.locator("fieldset.task").first
    # A second condition, grouped with OR.
    await task.locator(".add-condition").click()
    second = task.locator(".condition").nth(1)
    await second.locator('[data-path="tasks[0].conditions[1].metric"]').select_option("cpc")
    await second.locator('[data-path="tasks[0].conditions[1].operator"]').select_option("gte")
    await second.locator('[data-path="tasks[0].conditions[1].value"]').fill("2.5")
    await task.locator('[data-path="tasks[0].group"]').select_option("or")
    # A metric compared with another metric over its own period.
    await task.locator(".add-condition").click()
    third = task.locator(".condition").nth(2)
    await third.locator('[data-path="tasks[0].conditions[2].type"]').select_option("metric_metric")
    await third.locator('[data-path="tasks[0].conditions[2].other_period"]').select_option(
        "last_30d"
    )
    await third.locator(".remove-condition").click()
    assert await task.locator(".condition").count() == 2
    # The action's fields follow its type; a rename shows its result as it is typed.
    await task.locator('[data-path="tasks[0].action.type"]').select_option("rename")
    await task.locator('[data-path="tasks[0].action.template"]').fill("{name} (paused by {rule})")
    await expect(task.locator(".name-preview output")).to_have_text(
        "Summer sale — DE (paused by Builder rule)"
    )
    # An increase without its ceiling: the server's message lands on that field.
    await task.locator('[data-path="tasks[0].action.type"]').select_option("increase_budget")
    await task.locator('[data-path="tasks[0].action.amount"]').fill("15")
    await task.locator('[data-path="tasks[0].cooldown"]').select_option("24h")
    # The weekly grid: two hours clicked on Monday, one on Friday.
    await page.select_option("select[name=mode]", "timetable")
    await page.click('button.slot[data-day="mon"][data-slot="09:00"]')
    await page.click('button.slot[data-day="mon"][data-slot="17:00"]')
    await page.click('button.slot[data-day="fri"][data-slot="09:00"]')
    assert await page.input_value("input[name=week_mon]") == "09:00, 17:00"
    assert (
        await page.get_attribute('button.slot[data-day="fri"][data-slot="09:00"]', "aria-pressed")
        == "true"
    )
    await page.click("#save-rule")
    await page.wait_for_selector("#form-errors")
    pinned = page.locator('.field-error[data-error-for="tasks[0].action.max"]')
    await expect(pinned).to_be_visible()
    # Said with the field's label, never its path (PL-16).
    await expect(pinned).to_have_text("Never above (task 1): a budget increase needs a maximum")
    # Nothing typed was lost: the rows, the grid and the JSON tab show the same rule.
    await expect(task.locator(".condition")).to_have_count(2)
    assert await task.locator('[data-path="tasks[0].conditions[1].value"]').input_value() == "2.5"
    assert await page.input_value("input[name=week_mon]") == "09:00, 17:00"
    await task.locator('[data-path="tasks[0].action.max"]').fill("300")
    await page.click("#save-rule")
    await page.wait_for_selector("#saved")
    view = await _only_rule(runtime, tenant.workspace_id)
    saved = rule_tasks.task_in(view.tasks[0])
    assert saved.group == "or"
    assert saved.cooldown == "24h"
    assert [c.metric for c in saved.conditions] == ["purchase_roas", "cpc"]  # type: ignore[union-attr]
    assert isinstance(saved.action, IncreaseBudget)
    assert saved.action.max == Decimal(300)
    # The advanced tab holds the same document.
    await page.click("#tab-json")
    shown = json.loads(await page.input_value("#tasks_json"))
    assert shown[0]["action"]["max"] == "300"
    assert shown[0]["group"] == "or"


async def test_ar40_bid_actions_are_offered_at_ad_set_level_with_their_fields(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    page = signed_in_page
    await _shop(runtime, tenant, world)
    await page.goto(f"{live_url}/ui/adrules/rules/new")
    task = page.locator("fieldset.task").first
    action = task.locator('[data-path="tasks[0].action.type"]')
    # Campaigns have no bid of their own: no bid action is offered at campaign level.
    assert await action.locator('option[value="increase_bid"]').count() == 0
    await page.select_option("#rule-level", "adset")
    action = page.locator("fieldset.task").first.locator('[data-path="tasks[0].action.type"]')
    await action.select_option("increase_bid")
    task = page.locator("fieldset.task").first
    await task.locator('[data-path="tasks[0].action.amount"]').fill("10")
    await task.locator('[data-path="tasks[0].action.max"]').fill("30")
    await task.locator('[data-path="tasks[0].action.strategy"]').select_option("cost_cap")
    await page.select_option("#attribution-click", "7d_click")
    await page.click("#tab-json")
    shown = json.loads(await page.input_value("#tasks_json"))
    assert shown[0]["action"] == {
        "type": "increase_bid",
        "by": "percent",
        "amount": "10",
        "max": "30",
        "strategy": "cost_cap",
    }
