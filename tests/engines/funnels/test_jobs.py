"""The jobs as the workers run them: the campaign sweep snapshots a due campaign and its sender
job sends it (tracked links signed with the workspace secret); the trigger sweep fires the
time-based triggers; the ingest job processes stored events; the 10-second tick queues each of
its jobs once."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from sqlalchemy import select

from app.engines.funnels.campaigns import jobs as campaign_jobs
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.events.due.schedule_triggers import TimeTriggersPayload, run_time_triggers
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


async def test_a_due_campaign_whose_stored_audience_breaks_a_rule_does_not_stop_the_others(
    client, runtime, tenant, clock
) -> None:
    """An audience stored before audiences were checked turns its campaign back into a draft
    (scheduling it again names the problem); the campaign due beside it is started."""
    ws = tenant.workspace_id
    await contact(runtime, ws, "c0@example.com")
    r = await client.post(
        "/api/v1/funnels/fields", json={"key": "score", "type": "number"}, headers=auth(tenant)
    )
    assert r.status_code == 201, r.text
    ids = []
    for name in ("bad", "good"):
        body = {"name": name, "subject": "s", "body": "b"}
        made = await client.post("/api/v1/funnels/campaigns", json=body, headers=auth(tenant))
        ids.append(made.json()["id"])
        r = await client.post(
            f"/api/v1/funnels/campaigns/{ids[-1]}/schedule", json={}, headers=auth(tenant)
        )
        assert r.status_code == 200, r.text
    async with runtime.db.write() as uow:
        bad = await uow.session.get(Campaign, ids[0])
        assert bad is not None
        bad.audience = {"kind": "field", "field": "score", "op": "eq", "value": "abc"}
    await campaign_jobs.start_due(runtime.context(job_id="campaign-job"), clock.now())
    async with runtime.db.read() as s:
        rows = {c.name: c for c in await s.scalars(select(Campaign))}
    assert rows["bad"].status == "draft"
    assert rows["bad"].send_at is None
    assert rows["good"].status == "sending"
    again = await client.post(
        f"/api/v1/funnels/campaigns/{ids[0]}/schedule", json={}, headers=auth(tenant)
    )
    assert again.status_code == 422, again.text
    assert "is not a number" in again.json()["details"][0]["message"]


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


async def test_the_10_second_tick_queues_each_of_its_jobs_once(runtime, clock) -> None:
    """One matcher, one goal watcher, FUNNEL_RUNNER_TASKS runners and FUNNEL_DELIVER_TASKS
    deliverers, keyed by the tick: a second process sweeping the same tick adds nothing, the next
    tick queues its own."""
    from app.engines.funnels.jobs import tick
    from app.scheduling.models import Job
    from app.scheduling.queue import DatabaseQueue

    queue = DatabaseQueue(runtime.db, clock)
    settings = dataclasses.replace(
        runtime.settings,
        funnels=dataclasses.replace(runtime.settings.funnels, runner_tasks=3, deliver_tasks=2),
    )
    ctx = dataclasses.replace(runtime.context(), queue=queue, settings=settings)
    at = clock.now()
    await tick(ctx, at)
    await tick(ctx, at)  # the same tick, swept again
    async with runtime.db.read() as session:
        once = sorted(await session.scalars(select(Job.name)))
    assert once == sorted(
        ["funnels.match", "funnels.goals"] + ["funnels.advance"] * 3 + ["funnels.deliver"] * 2
    )
    await tick(ctx, at + timedelta(seconds=10))
    async with runtime.db.read() as session:
        assert len(list(await session.scalars(select(Job.id)))) == 2 * len(once)


async def test_a_runner_job_queues_its_deliverer_after_the_first_batch_that_made_mail(
    runtime,
) -> None:
    """The runner's job queues a deliverer as soon as a batch created outbox effects (the first
    mail goes out while later batches run), not after the whole drain; and once more at the end
    when later batches made mail too (the first deliverer may have found nothing due and
    ended)."""
    from app.engines.funnels.deps import FunnelsDeps
    from app.engines.funnels.jobs import Shard, advance
    from app.engines.funnels.runs.work.runner import BatchResult
    from app.scheduling.resources import Resources

    queued: list[tuple[str, int]] = []  # (job, runner batches done when it was queued)
    batches = [BatchResult(leased=5), BatchResult(leased=5, effects=5)]
    batches += [BatchResult(leased=5, effects=5), BatchResult()]
    done: list[BatchResult] = []

    class Runner:
        async def run_batch(self, **_: object) -> BatchResult:
            done.append(batches[len(done)])
            return done[-1]

    class Queue:
        async def enqueue(self, uow: object, spec: object, payload: Shard, **_: object) -> None:
            queued.append((spec.name, len(done)))  # type: ignore[attr-defined]

    deps = dataclasses.replace(runtime.resources.require(FunnelsDeps), runner=Runner())
    resources = Resources()
    resources.provide(FunnelsDeps, lambda: deps)
    ctx = dataclasses.replace(runtime.context(), queue=Queue(), resources=resources)
    await advance(ctx, Shard(shard=1))
    assert queued == [("funnels.deliver", 2), ("funnels.deliver", 4)]
    queued.clear()
    batches[2] = BatchResult(leased=5)  # only the second batch made mail: one deliverer
    done.clear()
    await advance(ctx, Shard(shard=1))
    assert queued == [("funnels.deliver", 2)]


async def test_runs_started_by_a_trigger_wake_every_runner_shard(runtime, tenant, clock) -> None:
    """Runs that became due now are shared by the worker processes: every runner shard is queued
    at once (FUNNEL_RUNNER_TASKS), not one runner job that drains the wave in one process."""
    from app.scheduling.models import Job
    from app.scheduling.queue import DatabaseQueue

    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["weekly"])
    await contact(runtime, ws, "ann@example.com", tags=["weekly"])
    trigger = {
        "kind": "schedule",
        "hour": 9,
        "minute": 30,
        "segment": {"kind": "has_tag", "tag": "weekly"},
    }
    await tagging_funnel(runtime, ws, trigger)
    queue = DatabaseQueue(runtime.db, clock)
    settings = dataclasses.replace(
        runtime.settings, funnels=dataclasses.replace(runtime.settings.funnels, runner_tasks=3)
    )
    ctx = dataclasses.replace(runtime.context(), queue=queue, settings=settings)
    clock.advance(minutes=31)
    try:
        await run_time_triggers(ctx, TimeTriggersPayload())
        async with runtime.db.read() as session:
            queued = list(
                await session.scalars(select(Job.payload).where(Job.name == "funnels.advance"))
            )
    finally:
        await queue.aclose()
    assert sorted(bytes(p) for p in queued) == [b'{"shard":%d}' % i for i in range(3)]
