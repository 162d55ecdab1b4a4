"""More of the worker: keyword data, provider refusals at post time, members re-read per run
(RT-4, RT-6), the log's pages and health (RT-36), the activity feed (RT-39) and the pause notice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import insert, select

from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.lists import add_keywords
from app.engines.ranktracking.models import KeywordList, Request, Result, Run, Schedule
from app.engines.ranktracking.records.log import schedule_log
from app.engines.ranktracking.schedules import run_now
from app.engines.ranktracking.work.notices import PauseNotice, send_pause_notice
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.integrations.serp import TransientProviderError
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from app.sandbox.smtp import SmtpSink
from tests.engines.ranktracking.factories import (
    available,
    fund,
    make_list,
    make_schedule,
    principal,
)
from tests.factories import Tenant


async def _run(runtime: Runtime, run_id: int) -> Run:
    async with runtime.db.read() as session:
        run = await session.get(Run, run_id)
        assert run is not None
        return run


async def test_keyword_data_run_volumes_no_data_and_omitted(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    sim.script("quiet term", no_data=True)
    sim.script("lost term", omit=True)
    await fund(runtime, tenant, 1000)
    kl = await make_list(runtime, tenant, ["busy term", "quiet term", "lost term"])
    schedule = await make_schedule(
        runtime,
        tenant,
        list_id=kl.id,
        data_type="keyword_data",
        frequency="monthly",
        depth=None,
        devices=None,
        domain=None,
        packages=["volume", "cpc"],
    )
    (run_id,) = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    ).run_ids
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    run = await _run(runtime, run_id)
    assert (run.status, run.retrieved, run.no_data, run.requested) == ("partial", 1, 1, 3)
    async with runtime.db.read() as session:
        rows = {
            r.keyword: r
            for r in (
                await session.execute(select(Result).where(Result.run_id == run_id))
            ).scalars()
        }
    assert rows["busy term"].data is not None
    assert rows["busy term"].data["search_volume"] > 0
    assert "cpc" in rows["busy term"].data
    assert "monthly_searches" not in rows["busy term"].data  # the trends package was not chosen
    assert rows["quiet term"].state == "no_data"
    assert (rows["lost term"].state, rows["lost term"].error_code) == ("failed", "not_returned")
    assert run.provider_cost is not None
    assert run.provider_cost > 0  # the provider's own cost, recorded beside


async def test_payment_required_at_post_fails_the_run_and_releases(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    sim.inject_status("serp.task_post", 40200)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    (run_id,) = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    ).run_ids
    await post_impl(
        RankTrackingDeps.of(runtime), RankTrackingDeps.of(runtime).serp, run_id, final_attempt=False
    )
    run = await _run(runtime, run_id)
    assert (run.status, run.error_code, run.settled_micros, run.reservation_state) == (
        "failed",
        "provider_payment_required",
        0,
        "settled",
    )
    assert await available(runtime, tenant) == 1000


async def test_rate_limited_post_is_retried_later_not_failed(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    sim.inject_status("serp.task_post", 40202)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    (run_id,) = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    ).run_ids
    client = RankTrackingDeps.of(runtime).serp
    with pytest.raises(TransientProviderError):
        await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    assert (await _run(runtime, run_id)).status == "dispatching"
    await post_impl(
        RankTrackingDeps.of(runtime), client, run_id, final_attempt=False
    )  # the job's retry
    assert (await _run(runtime, run_id)).status == "running"
    assert sim.tasks_posted == 2


async def test_rt4_rt6_members_resolved_per_run_history_untouched(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    await fund(runtime, tenant, 1000)
    kl = await make_list(runtime, tenant, ["a", "b"])
    linked = await make_schedule(runtime, tenant, list_id=kl.id)
    # RT-6: a subset chosen from the list is a fixed selection, not a slice of the list.
    subset = await make_schedule(runtime, tenant, keywords=["a"], name="subset")
    first = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), linked.id, "standard")
    ).run_ids[0]
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, first, final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    async with runtime.db.write() as uow:
        row = await uow.session.get(KeywordList, kl.id)
        assert row is not None
        await add_keywords(uow.session, row, ["c"], now=runtime.clock.now())
    second = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), linked.id, "standard")
    ).run_ids[0]
    third = (
        await run_now(RankTrackingDeps.of(runtime), principal(tenant), subset.id, "standard")
    ).run_ids[0]
    assert ((await _run(runtime, first)).requested, (await _run(runtime, first)).retrieved) == (
        2,
        2,
    )
    assert (await _run(runtime, second)).requested == 3
    assert (await _run(runtime, third)).keywords == ["a"]


async def test_rt36_log_pages_of_50_newest_first_with_health_of_12(
    runtime: Runtime, tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant)
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        ids = []
        for i in range(55):
            result = await uow.session.execute(
                insert(Request).returning(Request.id),
                [
                    {
                        "workspace_id": tenant.workspace_id,
                        "schedule_id": schedule.id,
                        "trigger": "recurring",
                        "queue": "standard",
                        "due_at": now,
                        "created_at": now + timedelta(hours=i),
                    }
                ],
            )
            ids.append(result.scalar_one())
        await uow.session.execute(
            insert(Run),
            [
                {
                    "workspace_id": tenant.workspace_id,
                    "schedule_id": schedule.id,
                    "request_id": rid,
                    "data_type": "serp",
                    "device": device,
                    "queue": "standard",
                    "keywords": [],
                    "status": "succeeded" if i % 2 else "failed",
                    "requested": 2,
                    "retrieved": 2 if i % 2 else 0,
                    "no_data": 0,
                    "reserved_micros": 0,
                    "reservation_state": "none",
                    "polls": 0,
                    "created_at": now,
                    "updated_at": now,
                }
                for i, rid in enumerate(ids)
                for device in ("desktop", "mobile")
            ],
        )
    async with runtime.db.read() as session:
        first = await schedule_log(session, schedule.id)
        assert len(first.items) == 50
        assert [g.request_id for g in first.items[:2]] == [ids[-1], ids[-2]]
        assert all(len(g.runs) == 2 for g in first.items)
        assert [h.request_id for h in first.health] == ids[-12:]  # oldest first, last 12 rows
        assert first.next_cursor is not None
        second = await schedule_log(session, schedule.id, before_id=int(first.next_cursor))
        assert [g.request_id for g in second.items] == list(reversed(ids[:5]))
        assert second.next_cursor is None
        assert [h.request_id for h in second.health] == ids[-12:]
        assert (first.items[1].status, first.items[1].missing) == ("succeeded", 0)
        # A failed group: everything unexplained is missing, per child row and in the group.
        assert (first.items[0].status, first.items[0].missing, first.items[0].runs[0].missing) == (
            "failed",
            4,
            2,
        )


async def test_rt39_activity_feed_and_rt23_pause_notice_email(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    import dataclasses

    from app.engines.ranktracking.money import activity_page

    schedule = await make_schedule(runtime, tenant)
    await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    async with runtime.db.read() as session:
        kinds = [a.kind for a in (await activity_page(session, tenant.workspace_id, None)).items]
    assert kinds == ["pause_notice", "run_skipped", "run_skipped", "schedule_created"]
    sink = SmtpSink().start()
    try:
        ctx = runtime.context()
        mail = dataclasses.replace(runtime.settings.mail, smtp_host=sink.host, smtp_port=sink.port)
        ctx = dataclasses.replace(ctx, settings=dataclasses.replace(runtime.settings, mail=mail))
        await send_pause_notice(ctx, PauseNotice(schedule_id=schedule.id, notice_id=1))
    finally:
        sink.stop()
    assert [m.to for m in sink.messages] == [[tenant.email]]
    assert "paused" in sink.messages[0].subject
    async with runtime.db.read() as session:
        row = await session.get(Schedule, schedule.id)
        assert row is not None
        assert row.status == "paused_balance"
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule.id,
        trigger=MANUAL,
        queue="standard",
        now=runtime.clock.now(),
    )
    assert launch.code == "schedule_paused_balance"
