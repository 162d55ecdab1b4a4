"""Job queue throughput: 20,000 no-op jobs enqueued and drained, beside raw baselines.

    .venv/bin/python bench/queue_throughput.py [--jobs 20000] [--pg URL] [--redis URL]
    .venv/bin/python bench/queue_throughput.py --queued 200000   # flat cost: 20,000 beside 200,000

Measured in the same run, on fresh databases:

* raw baselines: a bare lease + update loop on one connection, leasing 1 row per statement and 100
  rows per statement — asyncpg (``UPDATE … (SELECT … FOR UPDATE SKIP LOCKED) RETURNING`` with a
  partial index on leasable rows, then ``UPDATE … WHERE id = ANY(…)``) and sqlite3 (WAL, NORMAL);
* the database queue (``DatabaseQueue`` + one ``DatabaseWorker``) on PostgreSQL and on SQLite;
* arq on Redis (``ArqQueue`` + ``ArqWorkers``), when ``--redis`` answers;
* graphile-worker with its batching options (local queue, batched completion), when Node and npm
  are on the machine: ``npm install graphile-worker`` into a scratch folder at run time (never into
  the project), driven by ``bench/graphile_drain.mjs`` on a fresh database of its own.

Enqueue and drain are timed separately; drain ends when every job is recorded as done.

With ``--queued N`` it measures whether the queue's cost stays flat instead: the PostgreSQL queue
drains ``--jobs`` jobs and ``N`` jobs on fresh databases, alternating for ``--rounds`` rounds, and
prints both drain rates and the plan of the lease statement (``EXPLAIN ANALYZE``, rolled back) with
each table full.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

# Run as a plain script from any directory: make the repository's `app` package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
from cryptography.fernet import Fernet
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app import event_loop
from app.clock import SystemClock
from app.db.migrate import upgrade
from app.heap import freeze_startup_heap
from app.runtime import Runtime, build_runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.arq_workers import ArqWorkers
from app.scheduling.job_statements import JOB_CLAIM, PG_COMPLETE_PRELUDE, lease_order
from app.scheduling.jobs import PRIORITY_QUEUE, JobContext, JobPayload, JobSpec
from app.scheduling.queue import DatabaseQueue
from app.scheduling.worker import DatabaseWorker
from app.settings import Settings, load_settings


class Noop(JobPayload):
    n: int


@dataclass
class Counter:
    done: int = 0
    target: int = 0
    finished: asyncio.Event | None = None


COUNTER = Counter()


async def noop(ctx: JobContext, payload: Noop) -> None:
    COUNTER.done += 1
    if COUNTER.done >= COUNTER.target and COUNTER.finished is not None:
        COUNTER.finished.set()


NOOP = JobSpec("bench.noop", Noop, noop, max_tries=3)
URGENT_NOOP = JobSpec("bench.urgent_noop", Noop, noop, max_tries=3, queue=PRIORITY_QUEUE)
"""Registered, never enqueued: the worker serves the priority queue too, as a production one
does (the position-tracking hand-off), so every lease looks at both queues."""


@dataclass
class Result:
    name: str
    enqueue_per_s: float | None
    drain_per_s: float


# -- raw baselines -----------------------------------------------------------------------------


async def raw_asyncpg(dsn: str, jobs: int, batch: int, connections: int = 1) -> float:
    conn = await asyncpg.connect(dsn)
    others = [await asyncpg.connect(dsn) for _ in range(connections - 1)]
    try:
        await conn.execute("DROP TABLE IF EXISTS bench_raw")
        await conn.execute(
            "CREATE TABLE bench_raw (id bigserial PRIMARY KEY, status text NOT NULL, "
            "payload bytea NOT NULL, lease_expires_at timestamptz)"
        )
        await conn.execute(
            "CREATE INDEX bench_raw_leasable ON bench_raw (id) WHERE status = 'queued'"
        )
        await conn.copy_records_to_table(
            "bench_raw",
            records=[("queued", b"{}") for _ in range(jobs)],
            columns=["status", "payload"],
        )
        await conn.execute("ANALYZE bench_raw")
        lease_sql = (
            "UPDATE bench_raw SET status = 'running', lease_expires_at = now() + interval '5 min' "
            "WHERE id IN (SELECT id FROM bench_raw WHERE status = 'queued' ORDER BY id "
            "LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING id, payload"
        )
        finish_sql = "UPDATE bench_raw SET status = 'done', lease_expires_at = NULL WHERE id = ANY($1::bigint[])"

        async def loop(c: asyncpg.Connection) -> int:
            lease = await c.prepare(lease_sql)
            finish = await c.prepare(finish_sql)
            drained = 0
            while True:
                rows = await lease.fetch(batch)
                if not rows:
                    return drained
                await finish.fetch([r[0] for r in rows])
                drained += len(rows)

        began = time.perf_counter()
        drained = sum(await asyncio.gather(*(loop(c) for c in [conn, *others])))
        elapsed = time.perf_counter() - began
        assert drained == jobs
        await conn.execute("DROP TABLE bench_raw")
        return jobs / elapsed
    finally:
        for other in others:
            await other.close()
        await conn.close()


def raw_sqlite(path: Path, jobs: int, batch: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("DROP TABLE IF EXISTS bench_raw")
        conn.execute(
            "CREATE TABLE bench_raw (id INTEGER PRIMARY KEY, status TEXT NOT NULL, "
            "payload BLOB NOT NULL, lease_expires_at TEXT)"
        )
        conn.execute("CREATE INDEX bench_raw_leasable ON bench_raw (id) WHERE status = 'queued'")
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO bench_raw (status, payload) VALUES ('queued', ?)", [(b"{}",)] * jobs
        )
        conn.execute("COMMIT")
        began = time.perf_counter()
        drained = 0
        while True:
            rows = conn.execute(
                "UPDATE bench_raw SET status = 'running', lease_expires_at = datetime('now', '+5 minutes') "
                "WHERE id IN (SELECT id FROM bench_raw WHERE status = 'queued' ORDER BY id LIMIT ?) "
                "RETURNING id, payload",
                (batch,),
            ).fetchall()
            if not rows:
                break
            ids = [r[0] for r in rows]
            conn.execute(
                f"UPDATE bench_raw SET status = 'done', lease_expires_at = NULL "
                f"WHERE id IN ({','.join('?' * len(ids))})",
                ids,
            )
            drained += len(rows)
        elapsed = time.perf_counter() - began
        assert drained == jobs
        return jobs / elapsed
    finally:
        conn.close()


# -- the product -------------------------------------------------------------------------------


def bench_settings(database_url: str, redis_url: str = "", tmp: Path | None = None) -> Settings:
    env = {
        "DATABASE_URL": database_url,
        "ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SESSION_SECRET": uuid.uuid4().hex,
        "KEY_FILE": str((tmp or Path(tempfile.gettempdir())) / "bench-keys.json"),
        "LOG_LEVEL": "WARNING",
        "JOB_LEASE_LOOPS": os.environ.get("JOB_LEASE_LOOPS", "4"),
    }
    if redis_url:
        env["REDIS_URL"] = redis_url
        env["ARQ_QUEUE_NAME"] = f"bench-{uuid.uuid4().hex[:8]}"
    return load_settings(env)


async def enqueue_database(runtime: Runtime, jobs: int) -> float:
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    began = time.perf_counter()
    chunk = 5000
    for start in range(0, jobs, chunk):
        async with runtime.db.write() as uow:
            await queue.enqueue_many(
                uow, [(NOOP, Noop(n=i), None) for i in range(start, min(jobs, start + chunk))]
            )
    return jobs / (time.perf_counter() - began)


async def drain_database(
    runtime: Runtime, jobs: int, concurrency: int, batch: int, prefetch: int
) -> float:
    queue = runtime.queue
    assert isinstance(queue, DatabaseQueue)
    COUNTER.done, COUNTER.target, COUNTER.finished = 0, jobs, asyncio.Event()
    # As Runtime.start_workers does: JOB_LEASE_LOOPS loops share the process's concurrency.
    loops = runtime.settings.queue.lease_loops
    workers = [
        DatabaseWorker(
            queue,
            runtime.registry,
            runtime.context,
            concurrency=concurrency // loops,
            prefetch=prefetch // loops,
            batch_size=batch,
            lease_seconds=300,
            poll_interval=0.5,
            shutdown_grace=5,
        )
        for _ in range(loops)
    ]
    # As the worker process does once it has started (app.heap): the measured loop's full
    # collections then walk what it made, not the start-up heap and the seeded data's leftovers.
    freeze_startup_heap()
    began = time.perf_counter()
    tasks = [asyncio.create_task(w.run()) for w in workers]
    await COUNTER.finished.wait()
    for worker in workers:
        worker.stop()  # writes the last completions
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - began
    stats = await queue.stats()
    assert stats.done == jobs, stats
    assert stats.queued == stats.running == 0, stats
    return jobs / elapsed


async def database_queue(
    url: str,
    jobs: int,
    concurrency: int,
    batch: int,
    prefetch: int,
    name: str,
    plans: list[str] | None = None,
) -> Result:
    await upgrade(url)
    runtime = build_runtime(bench_settings(url), SystemClock())
    runtime.add_jobs([NOOP, URGENT_NOOP])
    try:
        enqueue_rate = await enqueue_database(runtime, jobs)
        if runtime.db.is_postgres:
            # As autovacuum does to a table in service once this many rows changed: a jobs table
            # fresh from its migration has the statistics of an empty one, on which the planner
            # reads the whole table to find 100 jobs by primary key.
            async with runtime.db.write_engine.connect() as conn:
                await conn.execute(text("ANALYZE jobs"))
                await conn.commit()
        if plans is not None:
            plans.extend(await lease_plan(runtime, batch))
        drain_rate = await drain_database(runtime, jobs, concurrency, batch, prefetch)
    finally:
        await runtime.aclose()
    return Result(name, enqueue_rate, drain_rate)


async def lease_plan(runtime: Runtime, batch: int) -> list[str]:
    """The plan of the worker's lease statement, as the worker sends it (``native_postgres``):
    ``batch`` jobs leased while ``batch`` finished ones are completed, executed and rolled back."""
    now = SystemClock().now()
    conn = await asyncpg.connect(asyncpg_dsn(runtime.settings.database.url))
    try:
        transaction = conn.transaction()
        await transaction.start()
        sql, names = JOB_CLAIM.native_postgres(partitions=1)
        claim = {
            "now": now,
            "owner": "plan",
            "expires": now,
            "limit": batch,
            **JOB_CLAIM.partition_arguments(["default"]),
        }
        finished = await conn.fetch(sql, *[claim[n] for n in names])
        # The worker's own lease: every queue it serves, the completions first.
        order = lease_order(runtime.registry.queues)
        sql, names = JOB_CLAIM.native_postgres(prelude=PG_COMPLETE_PRELUDE, partitions=len(order))
        lease = {
            **claim,
            **JOB_CLAIM.partition_arguments(order),
            "done_ids": [r["id"] for r in finished],
            "done_keys": [f"{r['id']} {r['attempts']}" for r in finished],
        }
        rows = await conn.fetch(
            f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}", *[lease[n] for n in names]
        )
        await transaction.rollback()
    finally:
        await conn.close()
    return [str(r[0]) for r in rows]


async def flat_cost(args: argparse.Namespace) -> None:
    """The PostgreSQL queue's drain at ``--jobs`` and at ``--queued`` jobs, alternating."""
    sizes = [args.jobs, args.queued]
    rates: dict[int, list[float]] = {size: [] for size in sizes}
    plans: dict[int, list[str]] = {}
    for _ in range(args.rounds):
        for size in sizes:
            url = await fresh_pg_database(args.pg)
            try:
                plan: list[str] | None = [] if size not in plans else None
                result = await database_queue(
                    url, size, args.concurrency, args.batch, args.prefetch, PG_QUEUE, plan
                )
                if plan is not None:
                    plans[size] = plan
            finally:
                await drop_pg_database(url)
            rates[size].append(result.drain_per_s)
            print(f"{size:>9,} jobs queued: drain {result.drain_per_s:,.0f} jobs/s", flush=True)
    for size in sizes:
        print(f"\nlease of {args.batch} (completing {args.batch}) with {size:,} jobs queued:")
        print("\n".join(f"    {line}" for line in plans[size]))
    print(f"\n| jobs queued | drain jobs/s, median of {args.rounds} | rounds |")
    print("|---:|---:|---|")
    for size in sizes:
        rounds = ", ".join(f"{r:,.0f}" for r in rates[size])
        print(f"| {size:,} | {median(rates[size]):,.0f} | {rounds} |")
    ratio = median(rates[args.queued]) / median(rates[args.jobs])
    print(f"\ndrain at {args.queued:,} / at {args.jobs:,}: {ratio:.2f}")


async def arq_queue(pg_url: str, redis_url: str, jobs: int, concurrency: int) -> Result:
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
                    queue.enqueue(None, NOOP, Noop(n=i))
                    for i in range(start, min(jobs, start + 500))
                )
            )
        enqueue_rate = jobs / (time.perf_counter() - began)
        COUNTER.done, COUNTER.target, COUNTER.finished = 0, jobs, asyncio.Event()
        workers = ArqWorkers(
            queue,
            runtime.registry,
            runtime.context,
            concurrency=concurrency,
            shutdown_grace=5,
            poll_delay=0.05,
        )
        began = time.perf_counter()
        task = asyncio.create_task(workers.run())
        await COUNTER.finished.wait()
        elapsed = time.perf_counter() - began
        await workers.shutdown()
        await task
        client = Redis.from_url(redis_url)
        keys = [k async for k in client.scan_iter(f"{settings.queue.arq_queue_name}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
        return Result("arq on Redis (ArqQueue + ArqWorkers)", enqueue_rate, jobs / elapsed)
    finally:
        await runtime.aclose()


GRAPHILE_VERSION = "0.18"
GRAPHILE_DRAIN = Path(__file__).resolve().parent / "graphile_drain.mjs"


def install_graphile(scratch: Path) -> Path | None:
    """graphile-worker from the npm registry into ``scratch``; its node_modules, or None."""
    if not (shutil.which("node") and shutil.which("npm")):
        return None
    done = subprocess.run(
        [
            "npm",
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            f"graphile-worker@{GRAPHILE_VERSION}",
        ],
        cwd=scratch,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"graphile-worker not installed: {done.stderr.strip()[:300]}")
        return None
    return scratch / "node_modules"


async def graphile_worker(
    modules: Path, pg_base: str, jobs: int, concurrency: int, local_queue: int
) -> Result:
    url = await fresh_pg_database(pg_base)
    try:
        proc = await asyncio.create_subprocess_exec(
            "node",
            str(GRAPHILE_DRAIN),
            str(modules),
            asyncpg_dsn(url),
            str(jobs),
            str(concurrency),
            str(local_queue),
            stdout=asyncio.subprocess.PIPE,
        )
        out = (await proc.communicate())[0].decode().strip()
        if proc.returncode != 0 or not out:
            raise RuntimeError("graphile-worker drain failed")
        figures = json.loads(out.splitlines()[-1])
    finally:
        await drop_pg_database(url)
    return Result(GRAPHILE, figures["enqueue"], figures["drain"])


async def fresh_pg_database(base_url: str) -> str:
    url = make_url(base_url)
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


async def drop_pg_database(db_url: str) -> None:
    url = make_url(db_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    await admin.dispose()


def asyncpg_dsn(sqlalchemy_url: str) -> str:
    return (
        make_url(sqlalchemy_url).set(drivername="postgresql").render_as_string(hide_password=False)
    )


async def redis_answers(url: str) -> bool:
    client = Redis.from_url(url)
    try:
        return bool(await client.ping())
    except Exception:
        return False
    finally:
        await client.aclose()


def median(values: list[float]) -> float:
    return statistics.median(values)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--concurrency", type=int, default=400, help="worker slots in all")
    parser.add_argument("--batch", type=int, default=100, help="jobs leased per statement")
    parser.add_argument(
        "--prefetch", type=int, default=200, help="jobs leased ahead of free slots, in all"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds of each measurement (median)"
    )
    parser.add_argument(
        "--single-row-jobs",
        type=int,
        default=2000,
        help="jobs of the one-row-per-statement loops (a steady per-row rate; slow)",
    )
    parser.add_argument("--skip-arq", action="store_true")
    parser.add_argument("--skip-graphile", action="store_true")
    parser.add_argument(
        "--graphile-concurrency", type=int, default=24, help="graphile-worker concurrentJobs"
    )
    parser.add_argument(
        "--queued",
        type=int,
        default=0,
        help="flat-cost mode: the PostgreSQL queue at --jobs beside this many jobs queued",
    )
    args = parser.parse_args()
    if args.queued:
        await flat_cost(args)
        return
    jobs = args.jobs
    rows: dict[str, list[Result]] = {}

    def add(result: Result) -> None:
        rows.setdefault(result.name, []).append(result)

    tmp = Path(tempfile.mkdtemp(prefix="sweepline-bench-"))
    use_arq = not args.skip_arq and await redis_answers(args.redis)
    graphile = None if args.skip_graphile else install_graphile(tmp)
    # One-row-per-statement loops are slow and steady: one round. The others alternate, so a
    # change in machine load hits the baseline and the queue alike.
    scratch = await fresh_pg_database(args.pg)
    try:
        dsn = asyncpg_dsn(scratch)
        single = min(jobs, args.single_row_jobs)
        add(Result("raw asyncpg, 1 row per statement", None, await raw_asyncpg(dsn, single, 1)))
        add(Result("raw sqlite3, 1 row per statement", None, raw_sqlite(tmp / "raw.db", single, 1)))
        for _ in range(args.rounds):
            add(
                Result(
                    "raw asyncpg, 100 rows per statement", None, await raw_asyncpg(dsn, jobs, 100)
                )
            )
            add(Result(RAW_PG_4, None, await raw_asyncpg(dsn, jobs, 100, connections=4)))
            if graphile is not None:
                add(
                    await graphile_worker(
                        graphile, args.pg, jobs, args.graphile_concurrency, args.prefetch
                    )
                )
            pg_url = await fresh_pg_database(args.pg)
            try:
                add(
                    await database_queue(
                        pg_url, jobs, args.concurrency, args.batch, args.prefetch, PG_QUEUE
                    )
                )
            finally:
                await drop_pg_database(pg_url)
            pg_url = await fresh_pg_database(args.pg)
            try:
                add(
                    await database_queue(
                        pg_url, jobs, args.concurrency, args.batch, 0, PG_NO_PREFETCH
                    )
                )
                if use_arq:
                    # arq keeps its dead jobs in the database, so it has a migrated one too.
                    add(await arq_queue(pg_url, args.redis, jobs, args.concurrency))
            finally:
                await drop_pg_database(pg_url)
            add(
                Result(
                    "raw sqlite3, 100 rows per statement",
                    None,
                    raw_sqlite(tmp / "raw.db", jobs, 100),
                )
            )
            sqlite_url = f"sqlite+aiosqlite:///{tmp / f'queue-{uuid.uuid4().hex[:6]}.db'}"
            add(
                await database_queue(
                    sqlite_url, jobs, args.concurrency, args.batch, args.prefetch, SQLITE_QUEUE
                )
            )
    finally:
        await drop_pg_database(scratch)

    print(
        f"\n{jobs:,} no-op jobs; worker: {args.concurrency} slots, {args.batch} jobs per lease, "
        f"{args.prefetch} prefetched; "
        f"median of {args.rounds} interleaved rounds\n"
    )
    print(f"| {'what':<44} | {'enqueue jobs/s':>14} | {'drain jobs/s':>12} |")
    print(f"|{'-' * 46}|{'-' * 15}:|{'-' * 13}:|")
    drain: dict[str, float] = {}
    for name in ORDER:
        if name not in rows:
            continue
        results = rows[name]
        drain[name] = median([r.drain_per_s for r in results])
        enqueues = [r.enqueue_per_s for r in results if r.enqueue_per_s]
        enqueue = f"{median(enqueues):,.0f}" if enqueues else "—"
        print(f"| {name:<44} | {enqueue:>14} | {drain[name]:>12,.0f} |")
    pg_ratio = drain[PG_QUEUE] / drain["raw asyncpg, 100 rows per statement"]
    lite_ratio = drain[SQLITE_QUEUE] / drain["raw sqlite3, 100 rows per statement"]
    pg4_ratio = drain[PG_QUEUE] / drain[RAW_PG_4]
    print(
        f"\ndatabase queue / raw 100-row loop: PostgreSQL {pg_ratio:.2f} (1 connection), "
        f"{pg4_ratio:.2f} (4 connections); SQLite {lite_ratio:.2f}"
    )
    if GRAPHILE in drain:
        print(
            f"database queue on PostgreSQL / graphile-worker batched (same run): "
            f"{drain[PG_QUEUE] / drain[GRAPHILE]:.2f}"
        )


PG_QUEUE = "database queue on PostgreSQL"
PG_NO_PREFETCH = "database queue on PostgreSQL, no prefetch"
RAW_PG = "raw asyncpg, 100 rows per statement"
RAW_PG_4 = "raw asyncpg, 100 rows per statement, 4 conns"
GRAPHILE = f"graphile-worker {GRAPHILE_VERSION}, local queue + batched completion"
SQLITE_QUEUE = "database queue on SQLite"
ORDER = [
    "raw asyncpg, 1 row per statement",
    RAW_PG,
    RAW_PG_4,
    PG_QUEUE,
    PG_NO_PREFETCH,
    GRAPHILE,
    "raw sqlite3, 1 row per statement",
    "raw sqlite3, 100 rows per statement",
    SQLITE_QUEUE,
    "arq on Redis (ArqQueue + ArqWorkers)",
]


if __name__ == "__main__":
    # The loop the worker process runs on, so the figures are the deployed ones.
    event_loop.run(main())
