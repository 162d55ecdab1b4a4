"""A running database-queue job can tell whether it still holds its lease (issue 11 item 2): it
does while its lease runs, not once the lease expired, and not after another worker took the job
over, while the new attempt does."""

from __future__ import annotations

import pytest

from app.clock import ManualClock
from app.scheduling.claim import LeaseLost
from app.scheduling.job_lease import check_lease, holds_lease
from app.scheduling.queue import DatabaseQueue
from tests.scheduling.conftest import Runtimes
from tests.scheduling.testjobs import RECORD, Work

LEASE = 30


async def test_a_job_holds_its_lease_until_it_expires_or_another_worker_takes_it(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key="long"), job_id="long")
    (first,) = await queue.lease("first-worker", ["default"], 1, LEASE)
    ctx = runtime.context(first.id, first.attempts)
    assert await holds_lease(ctx)
    await check_lease(ctx)

    manual.advance(LEASE / 3)
    await queue.extend_leases("first-worker", LEASE)  # the heartbeat
    manual.advance(LEASE / 2)
    assert await holds_lease(ctx), "renewed: still this run's"

    manual.advance(LEASE)  # the heartbeat stopped reaching the database
    assert not await holds_lease(ctx), "expired, even before anyone took it"
    await queue.recover_expired()
    (second,) = await queue.lease("second-worker", ["default"], 1, LEASE)
    assert (second.id, second.attempts) == (first.id, first.attempts + 1)
    with pytest.raises(LeaseLost):
        await check_lease(ctx)
    assert await holds_lease(runtime.context(second.id, second.attempts))


async def test_outside_a_database_queue_job_the_check_passes(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    assert await holds_lease(runtime.context())  # a direct call: no job, no lease to lose
