"""The dispatch sweep as the process runs it: registered every 10 seconds, honouring the platform
stop (AR-23), and handing its jobs to the real queue and worker."""

from __future__ import annotations

import dataclasses

import httpx
from sqlalchemy import select

from app.clock import ManualClock
from app.db.session import Database
from app.engines.adrules.claim.sweep import DISPATCH_SWEEP
from app.engines.adrules.models import Batch, Rule
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB
from app.engines.adrules.plugin import PLUGIN
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.sweeper import Every, SweepRunner
from app.settings import Settings
from app.wiring import assemble
from tests.conftest import eventually
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    store_token,
)
from tests.harness.app_client import asgi_transport


def test_ar10_the_dispatch_sweep_runs_every_10_seconds_and_the_job_is_registered() -> None:
    assert DISPATCH_SWEEP in PLUGIN.sweeps
    assert DISPATCH_SWEEP.schedule == Every(10)
    assert DISPATCH_SWEEP.honours_stop
    assert [job.name for job in PLUGIN.jobs] == [RUN_ACCOUNT_JOB]


async def _rule_on_account(runtime: Runtime, world: GraphWorld, ws: Workspace) -> int:
    world.add_account("act_1", "One")
    world.add_campaigns("act_1", 3)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    return await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=[account.id])


async def test_ar23_platform_stop_freezes_the_sweep_and_shows_in_ready(
    settings: Settings,
    shared_db: Database,
    runtime: Runtime,
    clock: ManualClock,
    ws: Workspace,
    world: GraphWorld,
) -> None:
    rule_id = await _rule_on_account(runtime, world, ws)
    stopped_settings = dataclasses.replace(
        settings, sweepers=dataclasses.replace(settings.sweepers, stop_all=True)
    )
    stopped = assemble(stopped_settings, clock, db=shared_db)
    runner = SweepRunner(
        stopped.db,
        clock,
        [DISPATCH_SWEEP],
        stopped.context,
        owner="test",
        lease_seconds=60,
        stopped=stopped.platform_stopped,
    )
    try:
        assert await runner.run_tick(DISPATCH_SWEEP, clock.now())
        # Even called directly, the sweep checks the stop itself.
        await DISPATCH_SWEEP.run(stopped.context(), clock.now())
        async with runtime.db.read() as session:
            rule = await session.get(Rule, rule_id)
            assert rule is not None
            assert rule.last_dispatched_at is None
            assert (await session.execute(select(Batch))).first() is None
        assert world.count() == 0

        from app.web.app import create_app

        app = create_app(stopped_settings, stopped, background=False)
        async with httpx.AsyncClient(transport=asgi_transport(app), base_url="http://t") as client:
            ready = (await client.get("/ready")).json()
        assert ready["platform_stop"] is True
    finally:
        await stopped.resources.aclose()


async def test_ar13_sweep_tick_fans_out_to_the_queue_and_the_worker_closes_the_batch(
    real_time_runtime: Runtime, world: GraphWorld
) -> None:
    runtime = real_time_runtime
    from tests.engines.adrules.factories import create_workspace

    ws = await create_workspace(runtime, name="Live")
    await _rule_on_account(runtime, world, ws)
    runner = SweepRunner(
        runtime.db,
        runtime.clock,
        [DISPATCH_SWEEP],
        runtime.context,
        owner="test",
        lease_seconds=60,
    )
    assert await runner.run_tick(DISPATCH_SWEEP, runtime.clock.now())
    runtime.start_workers()

    async def closed() -> bool:
        async with runtime.db.read() as session:
            batch = await session.scalar(select(Batch))
            return batch is not None and batch.finished_at is not None

    await eventually(closed, timeout=20)
    async with runtime.db.read() as session:
        batch = await session.scalar(select(Batch))
    assert batch is not None
    assert batch.status == "completed"
    assert batch.entities == 3
    assert batch.executed + batch.not_executed + batch.skipped + batch.errors == 3
