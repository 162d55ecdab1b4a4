"""Collecting 10,000 tasks at the provider's limits (RT-49–RT-51).

The shared poller (``app.engines.ranktracking.work.poller``, a tick every 10 s) collects 10
two-device schedules × 500 keywords posted through the worker's code, against the SERP simulator
behaving as the provider's documentation words it:

- ``tasks_ready`` lists the completed tasks "which haven't been collected yet" (a task stays
  listed until ``task_get`` collects it), at most 1,000 a call, about 20 calls a minute;
- at most ``--limit`` calls of any kind in any 60 s for the account (2,000 in the provider's help
  centre), ``40202`` beyond.

Three runs in the same process, each on a fresh database and simulator:

- paced: every call takes a slot of the in-process token bucket at ``--limit`` a minute
  (``RT_PROVIDER_CALLS_PER_MINUTE``);
- paced at 10,000 a minute against a provider allowing 10,000 (the default DataForSEO announced on
  19 October 2026), to show what the same code does when the account allows it;
- baseline: the same poller unpaced (the client before RT-51), refused calls retried by the
  client's backoff (1 s, 2 s, 4 s).

Provider time is simulated: a ManualClock advanced 10 s a tick and by every wait (the pacer's and
the client's backoff), so the figures do not depend on how busy this machine is; processing wall
time is reported apart.

    .venv/bin/python bench/ranktracking_limits.py [--schedules 10] [--keywords 500] [--limit 2000]
        [--pg postgresql+asyncpg://postgres@127.0.0.1:5432/postgres]

``--pg`` names a PostgreSQL server where each run creates (and then drops) a database of its own;
without it each run uses a fresh SQLite file.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.fernet import Fernet
from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import ManualClock
from app.db.migrate import upgrade
from app.engines.ranktracking import ledger
from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Run, Schedule
from app.engines.ranktracking.pricing import STANDARD
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.integrations.serp import SerpClient
from app.integrations.serp.pacing import LocalTokenBucket, Pacer, Unpaced
from app.platform.models import Organisation, Workspace
from app.sandbox.base import ThreadedServer
from app.sandbox.serp import SerpSimulator
from app.settings import load_settings
from app.wiring import assemble

START = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
TICK = timedelta(seconds=10)


async def seed(runtime, schedules: int, keywords: int) -> list[int]:  # type: ignore[no-untyped-def]
    async with runtime.db.write() as uow:
        s = uow.session
        org = Organisation(name="bench", created_at=START)
        s.add(org)
        await s.flush()
        ws = Workspace(
            organisation_id=org.id,
            name="bench",
            timezone="UTC",
            ingest_token_hash=uuid.uuid4().hex,
            webhook_secret_encrypted=b"x",
            allow_private_http=False,
            created_at=START,
        )
        s.add(ws)
        await s.flush()
        await ledger.top_up(
            s, organisation_id=org.id, workspace_id=ws.id, amount_micros=100_000_000_000, now=START
        )
        await s.execute(
            insert(Schedule),
            [
                {
                    "workspace_id": ws.id,
                    "organisation_id": org.id,
                    "owner_user_id": None,
                    "name": f"schedule {n}",
                    "list_id": None,
                    "keywords": [f"keyword {n} {k}" for k in range(keywords)],
                    "data_type": "serp",
                    "frequency": "weekly",
                    "depth": 100,
                    "location_code": 2840,
                    "language_code": "en",
                    "domain": "example.com",
                    "devices": "desktop,mobile",
                    "packages": None,
                    "monthly_cap_cents": None,
                    "status": "active",
                    "dedup_key": None,
                    "anchor_at": START,
                    "next_due_at": START + timedelta(days=7),
                    "retrying": False,
                    "consecutive_blocks": 0,
                    "consecutive_failures": 0,
                    "created_at": START,
                    "updated_at": START,
                }
                for n in range(schedules)
            ],
        )
        return list((await s.execute(select(Schedule.id).order_by(Schedule.id))).scalars())


async def collect(
    args: argparse.Namespace, db_url: str, *, provider_limit: int, paced_at: int
) -> dict[str, float]:
    """Post every task, then poll until every child run ended; the figures of the collection."""
    clock = ManualClock(START)

    async def waits(seconds: float) -> None:
        # Simulated time: a wait moves the clock. The pacer waits under its lock, one caller at a
        # time, so each call is sent at its slot.
        clock.advance(seconds=max(0.0, seconds))
        await asyncio.sleep(0)

    sim = SerpSimulator(
        seed=1,
        login="bench",
        password="bench",
        clock=clock,
        calls_per_minute=provider_limit,
        ready_until_collected=True,
    )
    server = ThreadedServer(sim.app).start()
    settings = load_settings(
        {
            "DATABASE_URL": db_url,
            "ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "SESSION_SECRET": "bench",
        }
    )
    runtime = assemble(settings, clock)
    pacer: Pacer = LocalTokenBucket(paced_at, clock, sleep=waits) if paced_at else Unpaced()
    client = SerpClient(server.url, "bench", "bench", retries=3, sleep=waits, pacer=pacer)
    try:
        deps = replace(RankTrackingDeps.of(runtime), serp=client)
        run_ids: list[int] = []
        for schedule_id in await seed(runtime, args.schedules, args.keywords):
            launch = await admit_and_send(
                deps, schedule_id, trigger=MANUAL, queue=STANDARD, now=clock.now()
            )
            run_ids += launch.run_ids
        for run_id in run_ids:
            await post_impl(deps, client, run_id, final_attempt=True)
        tasks = sim.tasks_posted
        # The posts are behind us: count the collection only.
        clock.advance(seconds=60)
        sim.state.reset_counts()
        sim.general_refused = 0
        sim.max_calls_in_a_minute = 0
        begin = clock.now()
        started = time.perf_counter()
        while True:
            await poll_ready(deps, client)
            async with runtime.db.read() as session:
                running = await session.scalar(
                    select(func.count()).select_from(Run).where(Run.status == "running")
                )
                last = await session.scalar(select(func.max(Run.finished_at)))
            if not running:
                break
            clock.advance(seconds=TICK.total_seconds())
        wall = time.perf_counter() - started
        async with runtime.db.read() as session:
            retrieved = await session.scalar(select(func.sum(Run.retrieved)))
        return {
            "tasks": tasks,
            "retrieved": float(retrieved or 0),
            "provider_seconds": ((last or clock.now()) - begin).total_seconds(),
            "wall_seconds": wall,
            "ready_calls": sim.state.count("serp.tasks_ready"),
            "get_per_task": sim.state.count("serp.task_get") / tasks,
            "max_calls_per_minute": sim.max_calls_in_a_minute,
            "refused": sim.general_refused + sim.rate_limited,
        }
    finally:
        await client.aclose()
        await runtime.stop()
        await runtime.resources.aclose()
        await runtime.queue.aclose()
        await runtime.db.dispose()
        server.stop()


@asynccontextmanager
async def database(server: str, tmp: str) -> AsyncIterator[str]:
    """A fresh database: a SQLite file in ``tmp``, or one created on the PostgreSQL ``server``."""
    if not server:
        yield f"sqlite+aiosqlite:///{tmp}/bench.db"
        return
    name = f"bench_limits_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=10)
    parser.add_argument("--keywords", type=int, default=500)
    parser.add_argument("--limit", type=int, default=2000, help="provider calls a minute")
    parser.add_argument("--pg", default="", help="a PostgreSQL server URL (default: SQLite)")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("app.integrations.serp.client").setLevel(logging.ERROR)
    results = {}
    runs = {
        f"paced {args.limit}/min": (args.limit, args.limit),
        "paced 10000/min": (10_000, 10_000),
        f"unpaced (baseline) vs {args.limit}/min": (args.limit, 0),
    }
    for label, (provider_limit, paced_at) in runs.items():
        with tempfile.TemporaryDirectory() as tmp:
            async with database(args.pg, tmp) as db_url:
                await upgrade(db_url)
                results[label] = await collect(
                    args, db_url, provider_limit=provider_limit, paced_at=paced_at
                )
    tasks = int(next(iter(results.values()))["tasks"])
    print(f"{args.schedules} schedules x 2 devices x {args.keywords} keywords = {tasks} tasks")
    print(f"{'':34}" + "".join(f"{label:>32}" for label in results))
    rows = [
        ("provider time to last result (s)", "provider_seconds", "{:.0f}"),
        ("processing wall time (s)", "wall_seconds", "{:.1f}"),
        ("tasks_ready calls", "ready_calls", "{:.0f}"),
        ("task_get calls per task", "get_per_task", "{:.3f}"),
        ("most calls in any 60 s", "max_calls_per_minute", "{:.0f}"),
        ("calls refused (40202)", "refused", "{:.0f}"),
        ("results stored", "retrieved", "{:.0f}"),
    ]
    for label, key, fmt in rows:
        print(f"{label:34}" + "".join(f"{fmt.format(r[key]):>32}" for r in results.values()))


if __name__ == "__main__":
    asyncio.run(main())
