"""The platform's own sweeps: queue gauges for /metrics, lease recovery, purging old finished jobs."""

from __future__ import annotations

from prometheus_client import REGISTRY

from app.clock import ManualClock
from app.scheduling.housekeeping import purge_finished_jobs, refresh_queue_gauges
from app.scheduling.models import JOB_QUEUED
from app.scheduling.queue import DatabaseQueue
from tests.scheduling.conftest import Runtimes
from tests.scheduling.helpers import count_jobs, status_of
from tests.scheduling.testjobs import RECORD, Work


async def test_queue_gauges_show_queued_running_and_dead_jobs(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    for i in range(5):
        await queue.enqueue(None, RECORD, Work(key=f"g{i}"), job_id=f"g{i}")
    (running, doomed) = await queue.lease("w", ["default"], 2, 30)
    await queue.fail(doomed, "RuntimeError: no", manual.now(), give_up=True)
    await refresh_queue_gauges(runtime.context(), manual.now())
    assert REGISTRY.get_sample_value("sweepline_jobs_queued") == 3.0
    assert REGISTRY.get_sample_value("sweepline_jobs_running") == 1.0
    assert REGISTRY.get_sample_value("sweepline_jobs_dead") == 1.0
    assert running.id != doomed.id


async def test_hourly_housekeeping_recovers_expired_leases_and_purges_old_done_jobs(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await queue.enqueue(None, RECORD, Work(key="old"), job_id="old")
    (old,) = await queue.lease("w", ["default"], 1, 30)
    await queue.complete([(old.id, old.attempts)])
    manual.advance(hours=23)
    await queue.enqueue(None, RECORD, Work(key="recent"), job_id="recent")
    (recent,) = await queue.lease("w", ["default"], 1, 30)
    await queue.complete([(recent.id, recent.attempts)])
    await queue.enqueue(None, RECORD, Work(key="orphan"), job_id="orphan")
    await queue.lease("dead-worker", ["default"], 1, 30)
    manual.advance(hours=1, seconds=31)  # "old" finished 24 h ago; the orphan's lease expired
    await purge_finished_jobs(runtime.context(), manual.now())
    assert await status_of(runtime.db, "old") is None, "past the retention: purged"
    assert await count_jobs(runtime.db, id="recent") == 1, "kept: its id still deduplicates"
    assert await status_of(runtime.db, "orphan") == JOB_QUEUED
    assert runtime.settings.queue.done_retention_hours == 24
