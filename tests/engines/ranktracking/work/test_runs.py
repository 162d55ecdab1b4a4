"""A run's way through the provider against the loopback simulator (spec §12, RT-13, RT-14,
RT-24, RT-33 to RT-35): its tasks posted, polled until ready, the run ended and settled; keyword
data runs; the provider's refusals at post time."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Result, Run, Schedule
from app.engines.ranktracking.records.log import run_out
from app.engines.ranktracking.schedules.manual_runs import run_now
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.integrations.serp import TransientProviderError
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.factories import (
    DOMAIN,
    KEYWORD_DATA,
    available,
    available_micros,
    fund,
    make_list,
    make_schedule,
    principal,
)
from tests.factories import Tenant


async def _launch(runtime: Runtime, schedule_id: int, queue: str = "standard") -> list[int]:
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule_id,
        trigger=MANUAL,
        queue=queue,
        now=runtime.clock.now(),
    )
    assert launch.launched, launch
    return launch.run_ids


async def _run(runtime: Runtime, run_id: int) -> Run:
    async with runtime.db.read() as session:
        run = await session.get(Run, run_id)
        assert run is not None
        return run


async def _results(runtime: Runtime, run_id: int) -> dict[str, Result]:
    async with runtime.db.read() as session:
        rows = (await session.execute(select(Result).where(Result.run_id == run_id))).scalars()
        return {r.keyword: r for r in rows}


async def test_two_device_run_goes_dispatching_running_succeeded(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-13/RT-33: a two-device request is two child runs, each with its own context and tag."""
    sim.place("red shoes", DOMAIN, 4)
    sim.place("blue shoes", DOMAIN, 37)  # beyond top 10: position absent, still retrieved
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, devices=["desktop", "mobile"])
    run_ids = await _launch(runtime, schedule.id)
    assert len(run_ids) == 2
    client = RankTrackingDeps.of(runtime).serp
    for run_id in run_ids:
        assert (await _run(runtime, run_id)).status == "dispatching"
        await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
        run = await _run(runtime, run_id)
        assert run.status == "running"
        assert run_out(run).pending == 2
        assert run_out(run).missing is None
    posted = [sim.task(str(r.task_id)) for r in (await _results(runtime, run_ids[0])).values()]
    assert {p["tag"] for p in posted if p} == {str(run_ids[0])}
    for run_id in run_ids:
        await poll_ready(RankTrackingDeps.of(runtime), client)
        run = await _run(runtime, run_id)
        assert run.status == "succeeded"
        assert (run.retrieved, run.no_data) == (2, 0)
        results = await _results(runtime, run_id)
        assert results["red shoes"].position == 4
        assert results["red shoes"].url
        assert DOMAIN in results["red shoes"].url
        assert results["blue shoes"].position is None  # RT-14: not within the requested depth
        assert results["blue shoes"].state == "retrieved"
        assert "organic" in (results["red shoes"].features or [])
    devices = {(await _run(runtime, r)).device for r in run_ids}
    assert devices == {"desktop", "mobile"}


async def test_still_in_queue_is_polled_again_not_missing(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    """§12: 40602 "still in queue" leaves the keyword pending and the run is polled again."""
    sim.script("blue shoes", queue_polls=3)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    (run_id,) = await _launch(runtime, schedule.id)
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    run = await _run(runtime, run_id)
    assert run.status == "running"
    assert (run.retrieved, run_out(run).pending, run_out(run).missing) == (1, 1, None)
    assert (await _results(runtime, run_id))["blue shoes"].state == "pending"
    n = 2
    while (await _run(runtime, run_id)).status == "running":
        clock.advance(30)
        await poll_ready(RankTrackingDeps.of(runtime), client)
        n += 1
        assert n < 10
    run = await _run(runtime, run_id)
    assert run.status == "succeeded"
    assert run_out(run).missing == 0
    # The listing is read again until the task is ready; each task is fetched exactly once.
    assert sim.state.count("serp.tasks_ready") >= 3
    assert sim.state.count("serp.task_get") == 2


async def test_pending_becomes_missing_when_the_run_ends(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    """RT-34: pending while active, missing only once terminal; RT-35 partial; RT-24 settlement
    never above the reservation, the rest released."""
    sim.script("blue shoes", queue_polls=1000)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, depth="top100")
    (run_id,) = await _launch(runtime, schedule.id)
    before = await available_micros(runtime, tenant)
    reserved = (await _run(runtime, run_id)).reserved_micros
    assert reserved > 0
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    assert (await _run(runtime, run_id)).status == "running"
    # A stuck task is closed by wall time since it was posted, not by a count of polls.
    clock.advance(minutes=runtime.settings.ranktracking.stale_after_minutes)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    run = await _run(runtime, run_id)
    out = run_out(run)
    assert run.status == "partial"
    assert (out.pending, out.missing, run.retrieved) == (None, 1, 1)
    assert run.settled_micros is not None
    assert run.settled_micros <= reserved
    assert run.reservation_state == "settled"
    assert await available_micros(runtime, tenant) == before + reserved - run.settled_micros


async def test_no_data_and_task_errors_never_write_a_position(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """§12: an explicit no-data answer is kept apart; a failed fetch never writes position 0."""
    sim.script("red shoes", no_data=True)
    sim.script("blue shoes", task_error=50000)
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    (run_id,) = await _launch(runtime, schedule.id)
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)
    run = await _run(runtime, run_id)
    results = await _results(runtime, run_id)
    assert results["red shoes"].state == "no_data"
    assert results["blue shoes"].state == "failed"
    assert all(r.position is None for r in results.values())
    assert run.status == "partial"
    assert (run.no_data, run_out(run).missing) == (1, 1)
    assert run.settled_micros == 0  # nothing measured, nothing charged
    async with runtime.db.read() as session:
        schedule_row = await session.get(Schedule, schedule.id)
        assert schedule_row is not None
        assert schedule_row.consecutive_blocks == 0


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
        **{**KEYWORD_DATA, "packages": ["volume", "cpc"]},
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
