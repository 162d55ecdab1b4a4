"""Large deletes in bounded chunks (issue 11 item 4): the hourly purge of finished jobs and the
frequency cap's pruning remove their rows a chunk per short transaction: every row the
predicate names goes, nothing else, at most a chunk per statement."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import event, insert

from app.clock import ManualClock
from app.scheduling.models import JOB_DONE, JOB_QUEUED, Job
from app.scheduling.queue import DatabaseQueue
from tests.scheduling.conftest import Runtimes
from tests.scheduling.helpers import count_jobs


async def _jobs(
    queue: DatabaseQueue, manual: ManualClock, n: int, status: str, prefix: str
) -> None:
    now = manual.now()
    async with queue.db.write() as uow:
        await uow.session.execute(
            insert(Job),
            [
                {
                    "id": f"{prefix}{i}",
                    "name": "test.record",
                    "queue": "default",
                    "payload": b"{}",
                    "status": status,
                    "priority": 0,
                    "attempts": 1,
                    "max_tries": 3,
                    "run_at": now,
                    "created_at": now,
                    "finished_at": now if status == JOB_DONE else None,
                }
                for i in range(n)
            ],
        )


async def test_finished_jobs_are_purged_a_chunk_at_a_time(
    runtimes: Runtimes, manual: ManualClock
) -> None:
    runtime = runtimes.make("database", manual)
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    await _jobs(queue, manual, 2_345, JOB_DONE, "old-")
    await _jobs(queue, manual, 7, JOB_QUEUED, "waiting-")
    manual.advance(hours=25)
    await _jobs(queue, manual, 5, JOB_DONE, "recent-")
    deletes: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM JOBS"):
            deletes.append(statement)

    engine = queue.db.write_engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        purged = await queue.purge_finished(manual.now() - timedelta(hours=24), chunk_rows=500)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert purged == 2_345
    assert len(deletes) == 5, "at most 500 rows a statement, each in its own transaction"
    assert await count_jobs(queue.db, status=JOB_QUEUED) == 7
    assert await count_jobs(queue.db, status=JOB_DONE) == 5, "within the retention: kept"
