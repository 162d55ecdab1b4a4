"""An audience snapshot's bulk job in its own process, SIGKILLed in the middle of a chunk (after
that chunk's recipients reached the database, before it commits).

Usage: python tests/engines/funnels/campaigns/audience_proc.py <database url> <bulk job id> <chunk items>
<kill at the nth recipients insert>
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from sqlalchemy import event

import app.models  # noqa: F401 - every table, so foreign keys resolve
from app.clock import SystemClock
from app.db.session import Database
from app.engines.funnels.campaigns.due.audience import AUDIENCE, AUDIENCE_JOB
from app.scheduling.bulk import run_bulk_job
from app.scheduling.jobs import JobContext
from app.scheduling.queue import DatabaseQueue
from app.scheduling.resources import Resources
from app.settings import load_settings


async def main(url: str, job_id: int, chunk_items: int, kill_at: int) -> None:
    settings = load_settings({"DATABASE_URL": url, "BULK_CHUNK_ITEMS": str(chunk_items)})
    db = Database(settings.database)
    inserts = 0

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        nonlocal inserts
        if statement.lstrip().upper().startswith("INSERT INTO CAMPAIGN_RECIPIENTS"):
            inserts += 1
            if inserts == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    event.listen(db.write_engine.sync_engine, "before_cursor_execute", before)
    clock = SystemClock()
    ctx = JobContext(
        db=db,
        queue=DatabaseQueue(db, clock),
        clock=clock,
        settings=settings,
        resources=Resources(),
        secrets=None,  # type: ignore[arg-type]
        job_id=f"bulk:{job_id}:0",
    )
    await run_bulk_job(ctx, AUDIENCE, job_id, AUDIENCE_JOB)


if __name__ == "__main__":
    url, job, chunk, kill_at = sys.argv[1:5]
    asyncio.run(main(url, int(job), int(chunk), int(kill_at)))
