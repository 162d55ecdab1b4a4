"""An ad-rule account run whose job lease was taken over stops before its next outside call
(issue 11 item 2): the run asks for its lease at its start and before every write, so a run
another worker took over writes nothing more and leaves the batch to that worker."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import update

from app.clock import ManualClock
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.adrules.models import Batch
from app.engines.adrules.payloads import RunAccountPayload
from app.engines.adrules.schemas import MetricValueCondition, PauseCampaign, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.claim import LeaseLost
from app.scheduling.job_lease import check_lease
from app.scheduling.jobs import JobContext
from app.scheduling.models import Job
from app.scheduling.queue import DatabaseQueue
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    Workspace,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)
from tests.harness.sleep import RecordingSleep

PAUSE_ALL = TaskIn(
    name="Pause everything that spent",
    conditions=[
        MetricValueCondition(metric="spend", period="today", operator="gte", value=Decimal("0"))
    ],
    action=PauseCampaign(),
    cooldown="15m",
)


@pytest.fixture
async def sim(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


async def _leased_job(
    runtime: Runtime, queue: DatabaseQueue, payload: RunAccountPayload
) -> JobContext:
    """The run as a database-queue job leased by this worker; its context."""
    await queue.enqueue(None, RUN_ACCOUNT, payload, job_id="account-run")
    leased = await queue.lease("this-worker", [RUN_ACCOUNT.queue], 10, 30)
    (job,) = [j for j in leased if j.id == "account-run"]
    return dataclasses.replace(runtime.context(job.id, job.attempts), queue=queue)


async def _take_over(runtime: Runtime, clock: ManualClock) -> None:
    """Another worker leases the job after this one's lease expired."""
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Job)
            .where(Job.id == "account-run")
            .values(
                attempts=Job.attempts + 1,
                leased_by="other-worker",
                lease_expires_at=clock.now() + timedelta(seconds=30),
            )
        )


async def _batch_status(runtime: Runtime, batch_record_id: int) -> str:
    async with runtime.db.read() as session:
        batch = await session.get(Batch, batch_record_id)
    assert batch is not None
    return batch.status


async def test_a_run_that_lost_its_job_lease_writes_nothing_more(
    runtime: Runtime,
    ws: Workspace,
    sim: tuple[GraphWorld, Clients],
    clock: ManualClock,
    database_queue: DatabaseQueue,
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 6)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[PAUSE_ALL])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    ctx = await _leased_job(runtime, database_queue, payload)
    taken: list[bool] = []

    async def lease() -> None:
        # The takeover happens once two campaigns have been paused.
        if len(world.updates) >= 2 and not taken:
            taken.append(True)
            await _take_over(runtime, clock)
        await check_lease(ctx)

    # The lease is asked before each write call (here two campaigns per batched write).
    deps = dataclasses.replace(
        make_deps(runtime, clients),
        sleep=RecordingSleep(),
        concurrency=1,
        lease=lease,
        write_batch_size=2,
    )
    status_before = await _batch_status(runtime, payload.batch_record_id)
    with pytest.raises(LeaseLost):
        await run_account_job(deps, payload)
    assert len(world.updates) == 2, "no write after the lease was lost"
    assert await _batch_status(runtime, payload.batch_record_id) != "error"
    assert status_before != "error"


async def test_a_run_whose_job_was_taken_over_before_it_started_calls_nothing(
    runtime: Runtime,
    ws: Workspace,
    sim: tuple[GraphWorld, Clients],
    clock: ManualClock,
    database_queue: DatabaseQueue,
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 3)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[PAUSE_ALL])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    ctx = await _leased_job(runtime, database_queue, payload)
    await _take_over(runtime, clock)
    deps = dataclasses.replace(
        make_deps(runtime, clients), sleep=RecordingSleep(), lease=lambda: check_lease(ctx)
    )
    with pytest.raises(LeaseLost):
        await run_account_job(deps, payload)
    assert world.updates == []
    assert world.count("batch") == 0, "not even a read"
