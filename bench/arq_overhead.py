"""The arq backend beside arq alone: 20,000 no-op jobs enqueued, then drained.

    .venv/bin/python bench/arq_overhead.py [--jobs 20000] [--concurrency 400] [--rounds 3]
        [--pg URL] [--redis URL] [--profile FILE]

Measured in the same run, rounds interleaved so a change in machine load hits both alike:

* **arq alone**: a plain ``arq.Worker`` with one no-op function, arq's own serialiser, jobs enqueued
  with ``enqueue_job``; the same worker slots, poll delay and result keeping as ours;
* **our backend**: ``ArqQueue.enqueue`` and ``ArqWorkers`` with a registered no-op ``JobSpec``
  (msgspec payload, job lease, timeouts, metrics, logs, dead-job recording wired in), on a migrated
  PostgreSQL database (the backend keeps its dead jobs there; a no-op job never writes to it).

Drain is timed from the workers' start to the last job's end; each side gets a fresh queue name.
``--profile FILE`` writes a cProfile of one drain of our backend.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from datetime import UTC

from arq import Worker
from arq.connections import RedisSettings, create_pool
from arq.worker import func
from queue_throughput import (
    COUNTER,
    NOOP,
    Noop,
    bench_settings,
    drop_pg_database,
    fresh_pg_database,
)
from redis.asyncio import Redis

from app import event_loop
from app.clock import SystemClock
from app.db.migrate import upgrade
from app.runtime import build_runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.arq_workers import ArqWorkers

POLL_DELAY = 0.05
KEEP_RESULT = 3600


async def forget(redis_url: str, prefix: str) -> None:
    """Delete the run's queue and its jobs' keys, results and retry counts among them (arq keeps
    a result an hour: 200,000 jobs would leave as many keys behind)."""
    client = Redis.from_url(redis_url)
    for pattern in (prefix, f"arq:result:{prefix}", f"arq:retry:{prefix}", f"arq:job:{prefix}"):
        keys = [k async for k in client.scan_iter(f"{pattern}*", count=10_000)]
        for chunk in range(0, len(keys), 10_000):
            await client.delete(*keys[chunk : chunk + 10_000])
    await client.aclose()


async def arq_alone(redis_url: str, jobs: int, concurrency: int) -> tuple[float, float]:
    queue_name = f"bench-alone-{uuid.uuid4().hex[:8]}"
    done = asyncio.Event()
    count = 0

    async def noop(ctx: dict[str, object], n: int) -> None:
        nonlocal count
        count += 1
        if count >= jobs:
            done.set()

    settings = RedisSettings.from_dsn(redis_url)
    pool = await create_pool(settings, default_queue_name=queue_name)
    began = time.perf_counter()
    for start in range(0, jobs, 500):
        await asyncio.gather(
            *(
                pool.enqueue_job("noop", i, _job_id=f"{queue_name}:{i}")
                for i in range(start, min(jobs, start + 500))
            )
        )
    enqueue = jobs / (time.perf_counter() - began)
    worker = Worker(
        functions=[func(noop, name="noop")],  # type: ignore[arg-type]
        redis_pool=pool,
        queue_name=queue_name,
        max_jobs=concurrency,
        poll_delay=POLL_DELAY,
        keep_result=KEEP_RESULT,
        handle_signals=False,
        timezone=UTC,
    )
    began = time.perf_counter()
    task = asyncio.create_task(worker.async_run())
    await done.wait()
    drain = jobs / (time.perf_counter() - began)
    worker.allow_pick_jobs = False
    await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
    task.cancel()
    await asyncio.gather(task, worker.close(), return_exceptions=True)
    await forget(redis_url, queue_name)
    await pool.aclose()
    return enqueue, drain


async def ours(
    pg_url: str, redis_url: str, jobs: int, concurrency: int, profile: str | None
) -> tuple[float, float]:
    settings = bench_settings(pg_url, redis_url)
    runtime = build_runtime(settings, SystemClock())
    runtime.add_jobs([NOOP])
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    try:
        began = time.perf_counter()
        for start in range(0, jobs, 500):
            await asyncio.gather(
                *(
                    queue.enqueue(None, NOOP, Noop(n=i), job_id=str(i))
                    for i in range(start, min(jobs, start + 500))
                )
            )
        enqueue = jobs / (time.perf_counter() - began)
        COUNTER.done, COUNTER.target, COUNTER.finished = 0, jobs, asyncio.Event()
        workers = ArqWorkers(
            queue,
            runtime.registry,
            runtime.context,
            concurrency=concurrency,
            shutdown_grace=5,
            poll_delay=POLL_DELAY,
        )
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        began = time.perf_counter()
        task = asyncio.create_task(workers.run())
        await COUNTER.finished.wait()
        drain = jobs / (time.perf_counter() - began)
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile or "")
        await workers.shutdown()
        await task
        await forget(redis_url, settings.queue.arq_queue_name)
        return enqueue, drain
    finally:
        await runtime.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--profile", default=None)
    args = parser.parse_args()
    pg_url = await fresh_pg_database(args.pg)
    try:
        await upgrade(pg_url)
        alone: list[tuple[float, float]] = []
        mine: list[tuple[float, float]] = []
        for round_ in range(args.rounds):
            alone.append(await arq_alone(args.redis, args.jobs, args.concurrency))
            profile = args.profile if round_ == 0 else None
            mine.append(await ours(pg_url, args.redis, args.jobs, args.concurrency, profile))
            print(
                f"round {round_ + 1}: arq alone {alone[-1][1]:,.0f} jobs/s, "
                f"our backend {mine[-1][1]:,.0f} jobs/s",
                flush=True,
            )
    finally:
        await drop_pg_database(pg_url)
    med = statistics.median
    print(f"\n{args.jobs:,} no-op jobs, {args.concurrency} slots, median of {args.rounds} rounds\n")
    print("| what | enqueue jobs/s | drain jobs/s |")
    print("|---|---:|---:|")
    for name, rows in (("arq alone (baseline)", alone), ("our arq backend", mine)):
        print(f"| {name} | {med(r[0] for r in rows):,.0f} | {med(r[1] for r in rows):,.0f} |")
    ratio = med(r[1] for r in mine) / med(r[1] for r in alone)
    print(f"\nour backend / arq alone, drain: {ratio:.2f}x")


if __name__ == "__main__":
    # The loop the worker process runs on, so the figures are the deployed ones.
    event_loop.run(main())
