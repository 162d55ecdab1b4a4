"""The shared poller (one per provider account): ``tasks_ready`` within the provider's per-minute
limit, each task fetched once, a garbage ``task_get`` retried, stuck runs closed by wall time."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import func, select

from app.clock import ManualClock
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Result, Run
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.integrations.serp import RateLimited
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.factories import fund, launch, make_schedule
from tests.factories import Tenant


async def _statuses(runtime: Runtime) -> dict[str, int]:
    async with runtime.db.read() as session:
        rows = await session.execute(select(Run.status, func.count()).group_by(Run.status))
        return {str(s): int(n) for s, n in rows.all()}


async def test_thirty_running_runs_share_one_poller_within_the_rate_limit(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    limit = 4
    deps = dataclasses.replace(
        RankTrackingDeps.of(runtime),
        settings=dataclasses.replace(
            runtime.settings,
            ranktracking=dataclasses.replace(
                runtime.settings.ranktracking, tasks_ready_per_minute=limit
            ),
        ),
    )
    sim.tasks_ready_per_minute = 20  # the provider's own limit; ours is lower
    # Tasks finish at different times: some after several listings.
    for i in range(0, 60, 7):
        sim.script(f"kw {i}", queue_polls=3)
    await fund(runtime, tenant, 100_000)
    client = RankTrackingDeps.of(runtime).serp
    run_ids: list[int] = []
    for s in range(30):
        schedule = await make_schedule(
            runtime, tenant, name=f"s{s}", keywords=[f"kw {i}" for i in range(s, s + 30)]
        )
        run_ids += await launch(runtime, schedule.id)
    for run_id in run_ids:
        await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    assert (await _statuses(runtime)) == {"running": 30}
    # One task's first answer is garbage: it is retried on the next tick (task_get is free).
    async with runtime.db.read() as session:
        garbage_task = await session.scalar(
            select(Result.task_id).where(Result.keyword == "kw 40").limit(1)
        )
    assert garbage_task
    sim.state.inject("serp.task_get", status=200, raw=b"<html>bad gateway</html>", times=1)

    ticks = 0
    while (await _statuses(runtime)) != {"succeeded": 30}:
        await poll_ready(deps, client)
        clock.advance(seconds=10)  # the sweep's period
        ticks += 1
        assert ticks < 60, await _statuses(runtime)
    assert sim.rate_limited == 0
    assert sim.max_ready_calls_per_minute("serp") <= limit
    tasks = sim.tasks_posted
    assert tasks == 900
    # Every task fetched once, plus the one garbage answer fetched again.
    assert sim.state.count("serp.task_get") == tasks + 1
    async with runtime.db.read() as session:
        states = dict(
            (await session.execute(select(Result.state, func.count()).group_by(Result.state))).all()
        )
    assert states == {"retrieved": 900}


async def test_a_task_that_stays_unreadable_fails_after_the_configured_attempts(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, keywords=["red shoes"])
    (run_id,) = await launch(runtime, schedule.id)
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    attempts = runtime.settings.ranktracking.fetch_attempts
    sim.state.inject("serp.task_get", status=200, raw=b"not json", times=attempts)
    for _ in range(attempts):
        await poll_ready(RankTrackingDeps.of(runtime), client)
        clock.advance(seconds=10)
    async with runtime.db.read() as session:
        run = await session.get(Run, run_id)
        result = await session.scalar(select(Result).where(Result.run_id == run_id))
    assert run is not None
    assert result is not None
    assert (result.state, result.error_code, result.fetch_attempts) == (
        "failed",
        "unreadable_answer",
        attempts,
    )
    assert run.status == "failed"
    assert sim.state.count("serp.task_get") == attempts


async def test_the_simulator_lists_a_ready_task_once_and_rate_limits_tasks_ready(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """The provider's documented behaviour the poller relies on."""
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    (run_id,) = await launch(runtime, schedule.id)
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    first = await client.serp_tasks_ready()
    assert len(first) == 2
    assert await client.serp_tasks_ready() == []  # listed once, even though not collected
    sim.tasks_ready_per_minute = 2  # two calls made within this minute already
    with pytest.raises(RateLimited) as refused:
        await client.serp_tasks_ready()
    assert refused.value.status_code == 40202


async def test_a_task_whose_listing_was_lost_is_fetched_directly_once_the_run_has_waited(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    """A ``tasks_ready`` answer lost with a crash lists its tasks no more: after 15 minutes the
    poller asks for them one by one (``task_get``), not before."""
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    (run_id,) = await launch(runtime, schedule.id)
    deps = RankTrackingDeps.of(runtime)
    await post_impl(deps, deps.serp, run_id, final_attempt=False)
    assert len(await deps.serp.serp_tasks_ready()) == 2  # listed, and the answer lost
    await poll_ready(deps, deps.serp)
    clock.advance(minutes=14)
    await poll_ready(deps, deps.serp)
    assert (await _statuses(runtime), sim.state.count("serp.task_get")) == ({"running": 1}, 0)
    clock.advance(minutes=1)
    await poll_ready(deps, deps.serp)
    assert (await _statuses(runtime), sim.state.count("serp.task_get")) == ({"succeeded": 1}, 2)
