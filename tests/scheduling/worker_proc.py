"""A worker process with the test jobs registered: ``python -m tests.scheduling.worker_proc``.

Settings come from the environment like ``python -m app worker``, and the process runs the same
:func:`~app.runtime.run_worker_process` loop (signal handling, graceful stop), so the shutdown tests
exercise the real code path with jobs whose behaviour the test controls.
"""

from __future__ import annotations

import asyncio
import os
import sys

from app.logs import configure_logging
from app.runtime import build_runtime, run_worker_process
from app.settings import load_settings
from tests.scheduling import testjobs


async def main() -> int:
    settings = load_settings(os.environ)
    configure_logging(settings.web.log_format, settings.web.log_level)
    runtime = build_runtime(settings)
    runtime.add_jobs(testjobs.ALL)
    return await run_worker_process(runtime)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
