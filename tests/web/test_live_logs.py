"""The rule log and a schedule's requests refresh in place (AR-47, RT-77): the newest page polls
the part it includes, an older page (a cursor) does not, and the part answers the same markup
without the page around it; another workspace's schedule is a 404."""

from __future__ import annotations

import httpx

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.factories import (
    collect,
    fund,
    launch,
    make_schedule,
    served_sim,
    sim,
)
from tests.factories import Tenant
from tests.platform.conftest import sign_in

__all__ = ["served_sim", "sim"]

LOG_PART = "/ui/adrules/log/partials/runs"


async def test_ar47_the_newest_page_of_the_rule_log_polls_its_runs(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    newest = await client.get("/ui/adrules/log")
    assert f'hx-get="{LOG_PART}?limit=50"' in newest.text
    assert 'hx-trigger="every 5s"' in newest.text
    one_rule = await client.get("/ui/adrules/log?rule_id=7&limit=20")
    assert f'hx-get="{LOG_PART}?limit=20&amp;rule_id=7"' in one_rule.text
    older = await client.get("/ui/adrules/log?cursor=5")
    assert older.status_code == 200
    assert LOG_PART not in older.text

    part = await client.get(LOG_PART, params={"limit": 20, "rule_id": 7})
    assert part.status_code == 200
    assert "<html" not in part.text
    assert 'id="batches"' in part.text
    assert "No rule has run yet." in part.text
    refused = await client.get(LOG_PART, params={"limit": 0})
    assert refused.status_code == 422


async def test_rt77_the_schedule_page_polls_faster_while_a_run_is_in_flight(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    sim: SerpSimulator,
) -> None:
    await fund(runtime, tenant, 1_000)
    schedule = await make_schedule(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    page_url = f"/ui/ranktracking/schedules/{schedule.id}"
    part = f"{page_url}/partials/runs"

    idle = await client.get(page_url)
    assert f'hx-get="{part}" hx-trigger="every 30s"' in idle.text

    run_ids = await launch(runtime, schedule.id)
    busy = await client.get(page_url)
    assert f'hx-get="{part}" hx-trigger="every 5s"' in busy.text
    fragment = await client.get(part)
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    assert 'id="rt-log"' in fragment.text
    assert "dispatching" in fragment.text
    assert 'hx-trigger="every 5s"' in fragment.text

    for run_id in run_ids:
        await collect(runtime, run_id)
    done = await client.get(part)
    assert "succeeded" in done.text
    assert 'hx-trigger="every 30s"' in done.text
    # An older page of the log stays as it was read.
    older = await client.get(page_url, params={"cursor": "1"})
    assert part not in older.text

    other = await make_schedule(runtime, other_tenant)
    assert (
        await client.get(f"/ui/ranktracking/schedules/{other.id}/partials/runs")
    ).status_code == 404
