"""A post job that lost its lease to another worker does not post the run's keywords again
(issue 11 item 2): the provider sees the keywords once, from the attempt that holds the job."""

from __future__ import annotations

import dataclasses

import pytest

from app.clock import ManualClock
from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Run
from app.engines.ranktracking.work.runs import POST_JOB, RunRef, post_tasks
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from app.scheduling.claim import LeaseLost
from app.scheduling.jobs import JobContext
from app.scheduling.queue import DatabaseQueue, LeasedJob
from tests.engines.ranktracking.factories import fund, make_schedule
from tests.factories import Tenant

LEASE = 30


async def _lease(queue: DatabaseQueue, worker: str, job_id: str) -> LeasedJob:
    leased = await queue.lease(worker, [POST_JOB.queue], 50, LEASE)
    (mine,) = [j for j in leased if j.id == job_id]
    return mine


async def test_a_post_job_whose_lease_was_taken_over_does_not_post(
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,
    clock: ManualClock,
    database_queue: DatabaseQueue,
) -> None:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime), schedule.id, trigger=MANUAL, queue="standard", now=clock.now()
    )
    (run_id,) = launch.run_ids
    queue = database_queue
    await queue.enqueue(None, POST_JOB, RunRef(run_id=run_id), job_id="post-under-test")
    first = await _lease(queue, "stalled-worker", "post-under-test")
    clock.advance(LEASE + 1)  # its heartbeat never reached the database
    await queue.recover_expired()
    second = await _lease(queue, "live-worker", "post-under-test")

    def ctx(job: LeasedJob) -> JobContext:
        return dataclasses.replace(runtime.context(job.id, job.attempts), queue=queue)

    with pytest.raises(LeaseLost):
        await post_tasks(ctx(first), RunRef(run_id=run_id))
    assert sim.tasks_posted == 0, "the stale attempt stopped before the provider"
    await post_tasks(ctx(second), RunRef(run_id=run_id))
    assert sim.tasks_posted == 2
    async with runtime.db.read() as session:
        run = await session.get(Run, run_id)
    assert run is not None
    assert run.status == "running"
