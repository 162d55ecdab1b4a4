"""Within every provider limit: the poller does not re-ask for a ``tasks_ready`` page it has seen
(RT-49), stamps its per-minute budget at the call (RT-50), and every provider call is paced under
the account's general limit (RT-51); the simulator enforces that limit as the provider does."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select

from app.clock import ManualClock
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import PollerState, Result, Run
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.integrations.serp import RateLimited, ReadyTask, SerpClient
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.factories import fund, launch, make_schedule
from tests.factories import Tenant


async def _post_all(runtime: Runtime, tenant: Tenant, schedules: int, keywords: int) -> int:
    await fund(runtime, tenant, 1_000_000)
    deps = RankTrackingDeps.of(runtime)
    run_ids: list[int] = []
    for s in range(schedules):
        schedule = await make_schedule(
            runtime,
            tenant,
            name=f"s{s}",
            keywords=[f"kw {s} {k}" for k in range(keywords)],
            devices=["desktop", "mobile"],
        )
        run_ids += await launch(runtime, schedule.id)
    for run_id in run_ids:
        await post_impl(deps, deps.serp, run_id, final_attempt=True)
    return len(run_ids)


async def _pending(runtime: Runtime) -> int:
    async with runtime.db.read() as session:
        return int(
            await session.scalar(
                select(func.count()).select_from(Result).where(Result.state == "pending")
            )
            or 0
        )


async def test_rt49_a_provider_listing_tasks_until_collected_is_not_asked_twice_for_a_page(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-49: the provider lists finished tasks "which haven't been collected yet" (the same
    first 1,000 until they are fetched). The poller lists a page, collects it, and lists again
    only because that page was full of tasks it had not seen: 1,200 tasks in one tick take two
    ``tasks_ready`` calls, each task fetched once; a later tick that finds only tasks it has
    already seen (a listing the provider updates late) asks once and stops."""
    sim.ready_until_collected = True
    await _post_all(runtime, tenant, schedules=3, keywords=200)
    assert sim.tasks_posted == 1200
    sim.state.reset_counts()

    report = await poll_ready(RankTrackingDeps.of(runtime), RankTrackingDeps.of(runtime).serp)

    assert (report.ready_calls, report.listed) == (2, 1200)
    assert sim.state.count("serp.tasks_ready") == 2
    assert sim.state.count("serp.task_get") == 1200
    assert await _pending(runtime) == 0
    async with runtime.db.read() as session:
        statuses = set((await session.execute(select(Run.status))).scalars())
    assert statuses == {"succeeded"}


async def test_rt49_a_full_page_of_tasks_already_seen_ends_the_listing(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-49: a full page whose tasks are all marked already (a listing the provider has not
    yet updated) is not asked for again within the tick, however much budget is left."""
    sim.script("kw 0 0", queue_polls=50)  # never ready at task_get: stays pending
    await _post_all(runtime, tenant, schedules=1, keywords=1)
    deps = RankTrackingDeps.of(runtime)
    async with runtime.db.read() as session:
        task_ids = list((await session.execute(select(Result.task_id))).scalars())

    class StaleListing:
        """The real client, but ``tasks_ready`` keeps answering the same full page."""

        def __init__(self, real: SerpClient) -> None:
            self.real = real
            self.ready_calls = 0

        async def serp_tasks_ready(self) -> list[ReadyTask]:
            self.ready_calls += 1
            page = [ReadyTask(task_id=str(t), tag="") for t in task_ids]
            filler = [ReadyTask(task_id=f"other-{n}", tag="") for n in range(1000 - len(page))]
            return page + filler

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

    client = StaleListing(deps.serp)
    report = await poll_ready(deps, client)  # type: ignore[arg-type]
    # The first page had new tasks and was full: one more listing, which showed nothing new.
    assert client.ready_calls == 2
    assert report.ready_calls == 2


async def test_rt50_the_budget_is_stamped_when_the_call_was_made(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, clock: ManualClock
) -> None:
    """RT-50: a ``tasks_ready`` call that waited (for its pacing slot) is counted in the
    per-minute budget at the moment it was answered, not when the budget was checked, so the
    provider never sees more calls in 60 s than the budget allows."""
    sim.script("kw 0 0", queue_polls=50)
    await _post_all(runtime, tenant, schedules=1, keywords=1)
    deps = RankTrackingDeps.of(runtime)
    checked_at = clock.now()

    class SlowSlot:
        def __init__(self, real: SerpClient) -> None:
            self.real = real

        async def serp_tasks_ready(self) -> list[ReadyTask]:
            clock.advance(seconds=40)  # the call waited 40 s for its slot
            return await self.real.serp_tasks_ready()

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

    await poll_ready(deps, SlowSlot(deps.serp))  # type: ignore[arg-type]
    async with runtime.db.read() as session:
        state = await session.get(PollerState, "serp")
    assert state is not None
    assert [datetime.fromisoformat(c) for c in state.calls] == [checked_at + timedelta(seconds=40)]


async def test_rt51_the_simulator_refuses_calls_beyond_the_general_limit(
    runtime: Runtime, sim: SerpSimulator, clock: ManualClock
) -> None:
    """RT-51: the simulated provider answers at most ``calls_per_minute`` calls of any kind in
    60 s; the next one gets ``40202`` (HTTP 200, the envelope's code), a minute later calls pass
    again."""
    sim.calls_per_minute = 5
    sim.tasks_ready_per_minute = None
    client = SerpClient(sim.url, "acme", "acme-secret", retries=0)
    try:
        for _ in range(5):
            assert await client.serp_tasks_ready() == []
        with pytest.raises(RateLimited) as refused:
            await client.get_serp_task("nope")
        assert refused.value.status_code == 40202
        assert sim.general_refused == 1
        clock.advance(seconds=60)
        assert await client.serp_tasks_ready() == []
        assert sim.max_calls_in_a_minute == 5
    finally:
        await client.aclose()


async def test_rt51_the_runtime_client_is_paced(runtime: Runtime) -> None:
    """RT-51: the provider client built from the settings takes a slot of the general limit
    before every request (an in-process bucket on the embedded default)."""
    from app.integrations.serp.pacing import LocalTokenBucket, RedisTokenBucket
    from app.wiring import ranktracking_deps

    settings = runtime.settings
    rt = dataclasses.replace(settings.ranktracking, provider_calls_per_minute=120)
    runtime.settings = dataclasses.replace(settings, ranktracking=rt)
    client = ranktracking_deps(runtime).serp
    try:
        pacer = client._pacer
        expected = RedisTokenBucket if settings.queue.uses_redis else LocalTokenBucket
        assert isinstance(pacer, expected)
        # 120 a minute less 1% (1): a burst of 1, then 118 a minute.
        assert pacer.capacity == 1.0
        assert pacer.rate == pytest.approx(118 / 60)
    finally:
        await client.aclose()
