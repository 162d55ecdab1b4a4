"""A sweeper process for the multi-process test: ``python -m tests.scheduling.sweep_proc NAME
PERIOD COUNT``. Prints ``ready`` once connected, then reads the first tick's Unix time on stdin.

At each scheduled wall-clock time it tries to run that tick of sweep ``NAME`` through
:meth:`SweepRunner.run_tick` (the same claim the real loop uses). The tick function records that
this process handled it as a job row ``NAME:<tick>:<pid>``, so a tick handled twice shows up as two
rows. Prints one JSON line: the ticks this process claimed, and whether it started late.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime

from app.clock import SystemClock
from app.runtime import build_runtime
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep, SweepRunner
from app.scheduling.worker import worker_identity
from app.settings import load_settings
from tests.scheduling.testjobs import RECORD, Work


async def main(name: str, period: float, count: int) -> dict[str, object]:
    runtime = build_runtime(load_settings(os.environ), SystemClock())
    await runtime.db.ping()  # connected before the test picks the first tick
    print("ready", flush=True)
    first_tick = float(await asyncio.to_thread(sys.stdin.readline))

    async def handle(ctx: JobContext, tick: datetime) -> None:
        stamp = f"{tick.timestamp():.3f}"
        await ctx.queue.enqueue(
            None, RECORD, Work(key=stamp), job_id=f"{name}:{stamp}:{os.getpid()}"
        )
        await asyncio.sleep(0.02)  # a tick takes a moment; the other process must not overlap it

    # The schedule object is not used: this process drives the ticks itself, at sub-second pace.
    sweep = Sweep(name, EVERY_10_SECONDS, handle)
    runner = SweepRunner(
        runtime.db,
        runtime.clock,
        [sweep],
        runtime.context,
        owner=worker_identity(),
        lease_seconds=60,
    )
    late = time.time() > first_tick
    claimed: list[str] = []
    try:
        for i in range(count):
            due = first_tick + i * period
            # Ticks on the wall clock: the racing processes share no clock or loop to signal on.
            await asyncio.sleep(max(0.0, due - time.time()))
            tick = datetime.fromtimestamp(due, UTC)
            if await runner.run_tick(sweep, tick):
                claimed.append(f"{tick.timestamp():.3f}")
    finally:
        await runtime.aclose()
    return {"claimed": claimed, "late": late}


if __name__ == "__main__":
    name, period, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    print(json.dumps(asyncio.run(main(name, period, count))))
