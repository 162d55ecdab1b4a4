"""A lease holder that stalls inside its transaction: ``python -m tests.scheduling.lock_holder_proc
<job id>``. It opens a job session (settings from the environment, like ``python -m app worker``),
locks the job's row (on SQLite: takes the write lock), says ``locked`` on stdout and stops itself
with SIGSTOP, as a process frozen by the machine would, its transaction open."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from sqlalchemy import select

from app.db.session import Database
from app.db.session_kinds import JOB, set_session_kind
from app.scheduling.models import Job
from app.settings import load_settings


async def main(job_id: str) -> int:
    settings = load_settings(os.environ)
    set_session_kind(JOB)
    db = Database(settings.database)
    async with db.write() as uow:
        await uow.session.execute(select(Job.id).where(Job.id == job_id).with_for_update())
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    await db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
