"""The jobs as the workers run them: the campaign sweep snapshots a due campaign and its sender
job sends it (tracked links signed with the workspace secret); the trigger sweep fires the
time-based triggers; the ingest job processes stored events."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from app.engines.funnels.campaigns import jobs as campaign_jobs
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.events.schedule_triggers import TimeTriggersPayload, run_time_triggers
from app.settings import MailSettings
from tests.conftest import auth
from tests.engines.funnels.factories import contact, runs_of, setup_names, tagging_funnel


async def test_campaign_sweep_and_sender_job(client, runtime, tenant, sink, clock) -> None:
    ws = tenant.workspace_id
    for i in range(4):
        await contact(runtime, ws, f"c{i}@example.com")
    body = {"name": "n", "subject": "s", "body": "b", "html": '<a href="https://x.example/">x</a>'}
    created = (
        await client.post("/api/v1/funnels/campaigns", json=body, headers=auth(tenant))
    ).json()
    await client.post(
        f"/api/v1/funnels/campaigns/{created['id']}/schedule", json={}, headers=auth(tenant)
    )
    mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="n@test.example")
    ctx = dataclasses.replace(
        runtime.context(job_id="campaign-job"),
        settings=dataclasses.replace(runtime.settings, mail=mail),
    )
    await campaign_jobs.tick(ctx, clock.now())
    await campaign_jobs.send(ctx, campaign_jobs.CampaignPayload(campaign_id=created["id"]))
    assert sorted(m.to[0] for m in sink.snapshot()) == [f"c{i}@example.com" for i in range(4)]
    html = sink.snapshot()[0].html or ""
    assert f"{runtime.settings.web.public_url}/t/l/" in html
    async with runtime.db.read() as s:
        row = await s.get(Campaign, created["id"])
    assert row is not None
    assert row.status == "done"
    assert row.lease_owner is None
    # A later tick finds nothing left to send.
    assert await campaign_jobs.start_due(ctx, clock.now() + timedelta(minutes=1)) == []


async def test_trigger_sweep_job_fires_schedules(runtime, tenant, clock) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["weekly"])
    ann = await contact(runtime, ws, "ann@example.com", tags=["weekly"])
    funnel_id = await tagging_funnel(
        runtime,
        ws,
        {
            "kind": "schedule",
            "hour": 9,
            "minute": 30,
            "segment": {"kind": "has_tag", "tag": "weekly"},
        },
    )
    clock.advance(minutes=31)
    await run_time_triggers(runtime.context(), TimeTriggersPayload())
    await run_time_triggers(runtime.context(), TimeTriggersPayload())
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [ann]
