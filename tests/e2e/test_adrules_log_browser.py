"""The rule log in a real browser (AR-25): an admin opens a run from the log and sees every record
with its per-step timeline; a plain member sees the same records without the timeline. The preview
page shows what a rule would do without changing anything (AR-4)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from app.engines.adrules.schemas import IncreaseBudget, MetricValueCondition, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.e2e.conftest import sign_in
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    create_setup,
    entities_from_world,
    graph_server,
    make_clients,
    make_deps,
    make_payload,
    settings,
    store_token,
    world,
)
from tests.factories import Tenant

pytestmark = pytest.mark.browser

# The Graph API simulator, and settings pointing the app (``live_url``) at it for the preview page.
__all__ = ["graph_server", "settings", "world"]


async def test_ar25_admin_sees_the_timeline_member_does_not(
    browser: Any, live_url: str, runtime: Runtime, tenant: Tenant, world: GraphWorld
) -> None:
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaign("act_1001", SimCampaign(id="31", name="Alpha", daily_budget=5000))
    world.add_campaign(
        "act_1001", SimCampaign(id="32", name="Beta", daily_budget=5000, delivering=False)
    )
    await store_token(runtime, tenant.workspace_id, JOB_TOKEN)
    setup = await create_setup(
        runtime,
        tenant.workspace_id,
        tasks=[
            TaskIn(
                name="Scale",
                conditions=[
                    MetricValueCondition(
                        metric="spend", period="today", operator="gt", value=Decimal(1)
                    )
                ],
                action=IncreaseBudget(amount=Decimal(10), max=Decimal(100)),
            )
        ],
        rule_name="Scale rule",
    )
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    clients = make_clients(world.base_url)
    try:
        await run_account_job(make_deps(runtime, clients), payload)
    finally:
        await clients.aclose()

    admin_ctx, member_ctx = await browser.new_context(), await browser.new_context()
    try:
        admin = await admin_ctx.new_page()
        await sign_in(admin, live_url, tenant.email, tenant.password)
        await admin.goto(f"{live_url}/ui/adrules/log")
        await admin.click(f"tr[data-batch='{payload.batch_record_id}'] a")
        await admin.wait_for_selector("#batch-summary")
        assert await admin.locator("#batch-id").inner_text() == payload.batch_id
        alpha = admin.locator("tr.record[data-campaign='31']")
        assert await alpha.get_attribute("data-status") == "executed"
        assert "55.00" in await alpha.locator("td.change").inner_text()
        assert await alpha.locator("ol.timeline li").count() >= 4
        beta = admin.locator("tr.record[data-campaign='32']")
        assert await beta.get_attribute("data-status") == "not_executed"
        assert "saw 0" in await beta.locator("ul.conditions").inner_text()

        member = await member_ctx.new_page()
        await sign_in(member, live_url, tenant.member_email, tenant.member_password)
        await member.goto(f"{live_url}/ui/adrules/log/{payload.batch_record_id}")
        await member.wait_for_selector("#batch-summary")
        assert await member.locator("tr.record").count() == 2
        assert await member.locator("ol.timeline").count() == 0
        assert "s" in await member.locator("tr.record[data-campaign='31'] .total").inner_text()

        # The preview reads the same account and changes nothing.
        world.state.reset_counts()
        await admin.goto(f"{live_url}/ui/adrules/rules/{setup.rule_id}/preview")
        await admin.wait_for_selector("#preview")
        assert await admin.locator("tr.preview-row[data-campaign='31']").get_attribute(
            "data-would"
        ) in {"act", "skip"}
        assert world.count("campaign.update") == 0
    finally:
        await admin_ctx.close()
        await member_ctx.close()
