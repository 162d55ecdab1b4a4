"""Collecting results: 30 schedules × 2 devices × 500 keywords against the SERP simulator.

The shared poller (``app.engines.ranktracking.work.poller``, one per provider account, a tick every
10 s) against the per-run polling it replaced, measured in the same run against the same simulator
behaviour (a finished task listed by ``tasks_ready`` once, at most 1,000 a call, about 20
``tasks_ready`` calls a minute, ``40202`` beyond):

- shared poller: the real code on a real database (SQLite file, or ``--url`` PostgreSQL), runs
  admitted and posted through the worker's code, then poll ticks until every child run is terminal;
- per-run polling (baseline): the earlier algorithm driven with the same client — every 30 s each
  running run reads ``tasks_ready``, keeps its own tag's entries (the others are lost) and fetches
  them plus up to 20 of its pending tasks directly.

Provider time is simulated (a ManualClock advanced by the tick period); the wall time is what the
processing itself took. Figures: provider time from dispatch to the last result, ``tasks_ready``
and ``task_get`` calls per task, the most ``tasks_ready`` calls in any minute, calls refused with
``40202``.

    .venv/bin/python bench/ranktracking_polling.py [--schedules 30] [--keywords 500] [--url URL]

``--url`` must name an empty database of the benchmark's own: it is migrated and written to.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.fernet import Fernet
from sqlalchemy import func, insert, select

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
from app.integrations.serp import ProviderError, SerpClient, SerpTask
from app.platform.models import Organisation, Workspace
from app.sandbox.base import ThreadedServer
from app.sandbox.serp import SerpSimulator
from app.settings import load_settings
from app.wiring import assemble

START = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
TICK = timedelta(seconds=10)
OLD_POLL = timedelta(seconds=30)
OLD_DIRECT_GETS = 20


def keywords_of(schedule: int, count: int) -> list[str]:
    return [f"keyword {schedule} {k}" for k in range(count)]


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
                    "keywords": keywords_of(n, keywords),
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


async def shared_poller(args: argparse.Namespace, db_url: str) -> dict[str, float]:
    clock = ManualClock(START)
    sim = SerpSimulator(seed=1, login="bench", password="bench", clock=clock)
    server = ThreadedServer(sim.app).start()
    settings = load_settings(
        {
            "DATABASE_URL": db_url,
            "ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "SESSION_SECRET": "bench",
        }
    )
    runtime = assemble(settings, clock)
    client = SerpClient(server.url, "bench", "bench", retries=0)
    try:
        schedule_ids = await seed(runtime, args.schedules, args.keywords)
        run_ids: list[int] = []
        for schedule_id in schedule_ids:
            launch = await admit_and_send(
                RankTrackingDeps.of(runtime),
                schedule_id,
                trigger=MANUAL,
                queue=STANDARD,
                now=clock.now(),
            )
            run_ids += launch.run_ids
        for run_id in run_ids:
            await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=True)
        sim.state.reset_counts()
        tasks = sim.tasks_posted
        started = time.perf_counter()
        ticks = 0
        while True:
            await poll_ready(RankTrackingDeps.of(runtime), client)
            ticks += 1
            async with runtime.db.read() as session:
                running = await session.scalar(
                    select(func.count()).select_from(Run).where(Run.status == "running")
                )
            if not running:
                break
            clock.advance(seconds=TICK.total_seconds())
        wall = time.perf_counter() - started
        async with runtime.db.read() as session:
            retrieved = await session.scalar(select(func.sum(Run.retrieved)))
        return {
            "tasks": tasks,
            "retrieved": float(retrieved or 0),
            "provider_seconds": (ticks - 1) * TICK.total_seconds(),
            "wall_seconds": wall,
            "ready_per_task": sim.state.count("serp.tasks_ready") / tasks,
            "get_per_task": sim.state.count("serp.task_get") / tasks,
            "max_ready_per_minute": sim.max_ready_calls_per_minute("serp"),
            "rate_limited": sim.rate_limited,
            "limit": runtime.settings.ranktracking.tasks_ready_per_minute,
        }
    finally:
        await client.aclose()
        await runtime.stop()
        await runtime.resources.aclose()
        await runtime.queue.aclose()
        await runtime.db.dispose()
        server.stop()


async def per_run_polling(args: argparse.Namespace) -> dict[str, float]:
    """The earlier per-run algorithm, with the same client and simulator behaviour."""
    clock = ManualClock(START)
    sim = SerpSimulator(seed=1, login="bench", password="bench", clock=clock)
    server = ThreadedServer(sim.app).start()
    client = SerpClient(server.url, "bench", "bench", retries=0)
    try:
        pending: dict[str, set[str]] = {}
        for n in range(args.schedules):
            for device in ("desktop", "mobile"):
                tag = f"{n}-{device}"
                posted = await client.post_serp_tasks(
                    [
                        SerpTask(
                            tag=tag,
                            keyword=kw,
                            location_code=2840,
                            language_code="en",
                            device=device,
                            depth=100,
                        )
                        for kw in keywords_of(n, args.keywords)
                    ]
                )
                pending[tag] = {p.task_id for p in posted if p.task_id}
        sim.state.reset_counts()
        tasks = sim.tasks_posted
        gate = asyncio.Semaphore(8)

        async def poll(tag: str) -> None:
            try:
                listed = await client.serp_tasks_ready()
                ready = {t.task_id for t in listed if t.tag == tag}
            except ProviderError:
                ready = set()
            mine = pending[tag]
            wanted = [t for t in mine if t in ready]
            wanted += [t for t in mine if t not in ready][:OLD_DIRECT_GETS]

            async def get(task_id: str) -> None:
                async with gate:
                    try:
                        result = await client.get_serp_task(task_id)
                    except ProviderError:
                        return
                if result.state != "in_queue":
                    mine.discard(task_id)

            await asyncio.gather(*(get(t) for t in wanted))

        started = time.perf_counter()
        rounds = 0
        while any(pending.values()):
            rounds += 1
            for tag in [t for t, left in pending.items() if left]:
                await poll(tag)
            clock.advance(seconds=OLD_POLL.total_seconds())
        wall = time.perf_counter() - started
        return {
            "tasks": tasks,
            "provider_seconds": (rounds - 1) * OLD_POLL.total_seconds(),
            "wall_seconds": wall,
            "ready_per_task": sim.state.count("serp.tasks_ready") / tasks,
            "get_per_task": sim.state.count("serp.task_get") / tasks,
            "max_ready_per_minute": sim.max_ready_calls_per_minute("serp"),
            "rate_limited": sim.rate_limited,
            "polls_per_run": rounds,
        }
    finally:
        await client.aclose()
        server.stop()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=30)
    parser.add_argument("--keywords", type=int, default=500)
    parser.add_argument("--url", default="", help="a database URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        db_url = args.url or f"sqlite+aiosqlite:///{tmp}/bench.db"
        await upgrade(db_url)
        new = await shared_poller(args, db_url)
    old = await per_run_polling(args)
    tasks = int(new["tasks"])
    print(f"{args.schedules} schedules x 2 devices x {args.keywords} keywords = {tasks} tasks")
    print(f"{'':32} {'shared poller':>16} {'per-run polling':>16}")
    rows = [
        ("provider time to last result (s)", "provider_seconds", "{:.0f}"),
        ("processing wall time (s)", "wall_seconds", "{:.1f}"),
        ("tasks_ready calls per task", "ready_per_task", "{:.4f}"),
        ("task_get calls per task", "get_per_task", "{:.3f}"),
        ("max tasks_ready calls / minute", "max_ready_per_minute", "{:.0f}"),
        ("tasks_ready refused (40202)", "rate_limited", "{:.0f}"),
    ]
    for label, key, fmt in rows:
        print(f"{label:32} {fmt.format(new[key]):>16} {fmt.format(old[key]):>16}")
    print(f"results stored by the shared poller: {new['retrieved']:.0f} of {tasks}")
    print(
        f"configured tasks_ready limit: {new['limit']:.0f}/min; per-run polls per run: "
        f"{old['polls_per_run']:.0f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
