"""A schedule's keywords resolved per run (RT-4, RT-6): a list's members are read again for each
request, a subset chosen from a list is a fixed selection, and history is untouched."""

from __future__ import annotations

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.lists import add_keywords
from app.engines.ranktracking.models import KeywordList, Run
from app.engines.ranktracking.schedules.manual_runs import run_now
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.factories import fund, make_list, make_schedule, principal
from tests.factories import Tenant


async def _run(runtime: Runtime, run_id: int) -> Run:
    async with runtime.db.read() as session:
        run = await session.get(Run, run_id)
        assert run is not None
        return run


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
