"""Ad rules in a real browser: token, discovery and activation; the rule editor with validation
messages beside the fields; the rules list with next run and last batch; the batch log; the
platform stop shown."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.db.session import Database
from app.engines.adrules.claim.sweep import DISPATCH_SWEEP
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.sandbox.meta import GraphWorld
from app.settings import Settings
from app.wiring import assemble
from tests.e2e.conftest import sign_in
from tests.engines.adrules.factories import TOKEN, graph_server, settings, world
from tests.factories import Tenant

__all__ = ["graph_server", "settings", "world"]

pytestmark = pytest.mark.browser

BAD_TASKS = '[{"conditions": [{"type": "metric_value", "metric": "spend", "operator": "gt", "value": "5"}], "action": {"type": "increase_budget", "amount": "10"}}]'
GOOD_TASKS = '[{"conditions": [{"type": "metric_value", "metric": "spend", "operator": "gt", "value": "5"}], "action": {"type": "increase_budget", "amount": "10", "max": "200"}, "cooldown": "24h"}]'


async def test_accounts_rule_editor_rules_list_and_batch_log(
    signed_in_page: Any, live_url: str, runtime: Runtime, world: GraphWorld
) -> None:
    page = signed_in_page
    world.add_account("act_501", "Shop Berlin", currency="EUR")
    world.add_account("act_502", "Shop Paris", currency="EUR")
    world.add_campaigns("act_501", 4)
    world.grant(TOKEN, "act_501", "act_502")

    # Ad accounts: token, discovery (inactive), activation.
    await page.goto(f"{live_url}/ui/adrules/accounts")
    await page.click("#paste-token summary")
    await page.fill("input[name=token]", TOKEN)
    await page.click("#save-token")
    await page.wait_for_selector("text=A pasted token is set")
    assert TOKEN not in await page.content()
    await page.click("#discover")
    await page.wait_for_selector("#message")
    rows = page.locator("#accounts tbody tr")
    assert await rows.count() == 2
    assert await page.locator("tr[data-meta-id=act_501] .badge").inner_text() == "inactive"
    await page.click("tr[data-meta-id=act_501] button")
    await page.wait_for_selector("tr[data-meta-id=act_501] .badge.active")

    # Rule editor: invalid input comes back with messages beside the fields, nothing saved.
    await page.goto(f"{live_url}/ui/adrules/rules/new")
    await page.fill("input[name=name]", "")
    await page.check("input[name=account_ids] >> nth=0")
    await page.select_option("select[name=mode]", "timetable")
    await page.fill("input[name=start_date]", "2026-04-10")
    await page.fill("input[name=end_date]", "2026-04-01")
    await page.click("#tab-json")  # the builder's "advanced" tab
    await page.fill("#tasks_json", BAD_TASKS)
    await page.click("#save-rule")
    await page.wait_for_selector("#form-errors")
    task_errors = await page.locator(".field-error[data-field=tasks]").inner_text()
    assert "Never above (task 1)" in task_errors  # the label, never the path (PL-16)
    assert "[" not in task_errors
    assert await page.locator(".field-error[data-field=week]").count() == 1
    assert await page.locator(".field-error[data-field=end_date]").count() == 1
    # What the person typed is kept.
    assert await page.input_value("#tasks_json") == BAD_TASKS

    await page.fill("input[name=name]", "Scale winners")
    await page.select_option("select[name=mode]", "interval")
    await page.fill("input[name=minutes]", "15")
    await page.fill("input[name=start_date]", "")
    await page.fill("input[name=end_date]", "")
    await page.select_option("select[name=status]", "active")
    await page.click("#tab-json")
    await page.fill("#tasks_json", GOOD_TASKS)
    await page.click("#save-rule")
    await page.wait_for_selector("#saved")
    assert "active" in await page.locator("#rule-state").inner_text()

    # Rules list: status, next run, last batch.
    await page.goto(f"{live_url}/ui/adrules")
    row = page.locator("#rules tbody tr").first
    assert "Scale winners" in await row.inner_text()
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", await row.locator(".next-run").inner_text())
    assert "never run" in await row.locator(".last-batch").inner_text()

    await DISPATCH_SWEEP.run(runtime.context(), runtime.clock.now())

    await page.reload()
    assert "queued" in await page.locator("#rules tbody tr .last-batch").first.inner_text()
    await page.click("#rules tbody tr .last-batch a")
    await page.wait_for_selector("#batches")
    log = await page.locator("#batches tbody tr").first.inner_text()
    assert "act_501" in log
    assert "queued" in log


@pytest.fixture
async def stopped_url(
    settings: Settings, shared_db: Database, runtime: Runtime
) -> AsyncIterator[str]:
    from app.web.app import create_app

    stopped = dataclasses.replace(
        settings, sweepers=dataclasses.replace(settings.sweepers, stop_all=True)
    )
    stopped_runtime = assemble(stopped, runtime.clock, db=shared_db)
    app = create_app(stopped, stopped_runtime, background=False)
    async with serve_in_loop(app) as url:
        yield url
    await stopped_runtime.resources.aclose()


async def test_ar23_platform_stop_is_shown_on_the_ad_rules_pages(
    page: Any, stopped_url: str, tenant: Tenant
) -> None:
    await sign_in(page, stopped_url, tenant.email, tenant.password)
    await page.goto(f"{stopped_url}/ui/adrules")
    assert await page.locator("#adrules-stopped").is_visible()
    assert await page.locator("#platform-stop").is_visible()


async def test_members_see_accounts_but_cannot_activate(
    page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    from tests.engines.adrules.factories import create_account

    await create_account(runtime, workspace_id=tenant.workspace_id, meta_id="act_9", active=False)
    await sign_in(page, live_url, tenant.member_email, tenant.member_password)
    await page.goto(f"{live_url}/ui/adrules/accounts")
    assert await page.locator("tr[data-meta-id=act_9]").count() == 1
    assert await page.locator("#discover").count() == 0
    assert await page.locator("tr[data-meta-id=act_9] button").count() == 0
