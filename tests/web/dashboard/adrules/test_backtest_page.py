"""AR-26 backtest page: the form on a rule's page, the estimate labelled as such, the totals, a
timeline chart per object the rule would have acted on and the table of would-be actions; a bad
range is shown beside the form (422); another workspace's rule is 404."""

from __future__ import annotations

import html
import json
import re

import httpx

from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.backtest.history import build_history, build_world
from tests.factories import Tenant
from tests.platform.conftest import sign_in


async def test_ar26_backtest_page_shows_the_estimate_charts_and_would_be_actions(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    world: GraphWorld,
) -> None:
    build_world(world)
    _, rule_id, _ = await build_history(runtime, tenant.workspace_id)
    await sign_in(client, tenant.email, tenant.password)
    editor = await client.get(f"/ui/adrules/rules/{rule_id}")
    assert f'href="/ui/adrules/rules/{rule_id}/backtest"' in editor.text

    form = await client.get(f"/ui/adrules/rules/{rule_id}/backtest")
    assert form.status_code == 200
    assert 'id="backtest-form"' in form.text
    assert "backtest-result" not in form.text  # nothing runs before the form is sent
    assert world.state.count("*") == 0

    r = await client.get(
        f"/ui/adrules/rules/{rule_id}/backtest",
        params={"since": "2026-02-20", "until": "2026-02-26"},
    )
    assert r.status_code == 200, r.text
    assert "An estimate" in r.text
    assert "old decisions" in r.text
    assert re.search(r'<b class="spend-paused">80\.00 USD</b>', r.text)
    assert r.text.count('class="backtest-action"') == 16
    charts = [
        json.loads(html.unescape(raw))
        for raw in re.findall(r"class=\"sw-chart backtest-chart\"[^>]*data-chart='([^']*)'", r.text)
    ]
    assert len(charts) == 3  # the three objects it would have acted on
    budgets = charts[0]["series"][0]["values"]
    assert budgets == [48.0, 57.6, 57.6, 57.6, 57.6, 69.12, 70.0]  # the most-acted-on first
    assert "script-src" not in r.text  # no inline script: the chart reads its data attribute
    assert world.updates == []

    bad = await client.get(
        f"/ui/adrules/rules/{rule_id}/backtest",
        params={"since": "2026-02-26", "until": "2026-02-20"},
    )
    assert bad.status_code == 422
    assert "To: must be on or after since" in bad.text

    client.cookies.clear()  # a browser of the other workspace
    await sign_in(client, other_tenant.email, other_tenant.password)
    foreign = await client.get(f"/ui/adrules/rules/{rule_id}/backtest")
    assert foreign.status_code == 404
