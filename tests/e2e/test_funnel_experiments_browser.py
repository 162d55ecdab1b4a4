"""The funnel's experiments and analytics page in a real headless Chromium (FN-55, FN-56,
FN-58, FN-60): the experiment's branches and verdict, the daily chart drawn by the shared charts script
without a console error, and a winner declared then reverted through the page's own forms."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.async_api import expect

from app.engines.funnels.definitions.service import create_funnel, parse_definition, publish
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.work.runner import Runner
from app.runtime import Runtime
from app.settings import FunnelSettings
from tests.e2e.page_errors import watch_errors
from tests.engines.funnels.experiments.test_experiments import experiment_graph
from tests.engines.funnels.factories import bulk_contacts, setup_names
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_fn55_experiment_report_page_in_a_browser(
    signed_in_page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    ws = tenant.workspace_id
    now = runtime.clock.now()
    await setup_names(runtime, ws, tags=["seen"])
    people = await bulk_contacts(runtime, ws, 30)
    async with runtime.db.write() as uow:
        funnel = await create_funnel(
            uow.session, ws, "Welcome test", parse_definition(experiment_graph()), now
        )
        version = await publish(uow.session, ws, funnel.id, user_id=None, now=now)
        for person in people:
            await enter(uow.session, version=version, contact_id=person, now=now)
    runner = Runner(runtime.db, FunnelSettings(), mail_domain="x.test", executors=EXECUTORS)
    while (await runner.run_batch(owner="browser-test", now=now)).leased:
        pass

    page = signed_in_page
    errors = watch_errors(page)
    await page.goto(f"{live_url}/ui/funnels/{funnel.id}")
    await expect(page.locator("#daily-chart canvas")).to_have_count(1)
    await expect(page.locator("#funnel-chart canvas")).to_have_count(1)
    await page.click("#experiments-link a")
    await page.wait_for_url(f"{live_url}/ui/funnels/{funnel.id}/experiments")
    await expect(page.locator("#experiment-ab")).to_have_attribute("data-verdict", "winner")
    assert "wins" in await page.locator("#verdict-ab").inner_text()
    rows = page.locator("#experiment-ab tbody tr")
    await expect(rows).to_have_count(2)
    await expect(page.locator("#series-chart canvas")).to_have_count(1)
    legend = await page.locator("#series-chart .u-legend").inner_text()
    for label in ("entered", "waiting", "exited", "converted"):
        assert label in legend

    await page.select_option("#branch-ab", "a")
    await page.click("#declare-ab")
    await expect(page.locator("#standing-ab")).to_have_text("a")
    assert "now gets every new entrant" in await page.locator("#notice").inner_text()
    await page.click("#revert-ab")
    await expect(page.locator("#declare-ab")).to_be_visible()
    await expect(page.locator("#history-ab tbody tr")).to_have_count(1)
    assert errors == []


async def test_fn53_a_split_is_made_an_experiment_in_the_visual_editor(
    signed_in_page: Any, live_url: str
) -> None:
    """No JSON typed: a split and a goal added on the canvas, the split's experiment switched on
    in its panel, its goal and minimum sample chosen; the draft holds the experiment."""

    page = signed_in_page
    errors = watch_errors(page)
    await page.goto(f"{live_url}/ui/funnels")
    await page.fill("#new-funnel input[name=name]", "Tested")
    await page.click("#new-funnel button[type=submit]")
    await page.wait_for_selector("#fe-editor:not([hidden])")
    for label in ("Goal", "Split"):
        await page.select_option("#fe-kind", label=label)
        await page.click("#fe-add")
    await page.locator('#fe-canvas .fe-node[data-node="split_1"]').click()
    await page.locator("#fe-panel").get_by_label("Judge the branches: report a winner").check()
    panel = page.locator("#fe-panel")
    await expect(panel.get_by_label("Converted when they reach the goal")).to_have_value("goal_1")
    await panel.get_by_label("People every branch needs before a verdict (default 100)").fill("50")
    await panel.get_by_label("Confidence").select_option("0.99")
    await panel.get_by_label("After the verdict, send new entrants to the winner").check()

    def experiment(text: str) -> Any:
        nodes = json.loads(text)["nodes"]
        return next(n for n in nodes if n["id"] == "split_1").get("experiment")

    await expect(page.locator("#definition")).to_have_value(re.compile(r'"auto_winner": true'))
    got = experiment(await page.locator("#definition").input_value())
    assert got == {"goal_node": "goal_1", "min_sample": 50, "confidence": 0.99, "auto_winner": True}
    assert errors == []
