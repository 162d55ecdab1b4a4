"""The hourly position-tracking sweep with 5,000 due schedules, beside raw baselines.

Measures one ``dispatch_due`` batch on PostgreSQL: every schedule goes through full admission (lock
the schedule, check for an active run, resolve members, check the cap, lock the organisation balance,
reserve every device or none, write the request and child runs, queue the worker jobs in the same
transaction), in chunks of schedules per transaction. Measured in the same run, on the same
database and with the same concurrency: the same number of bare single-row ledger inserts, one
transaction each (before and after the sweep), and admission one schedule per transaction (the
dispatcher's earlier shape) over a separate set of ``--single`` due schedules.

    /tmp/venv0/bin/python bench/ranktracking_sweep.py [--schedules 5000] [--single 1000] [--orgs 50] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.fernet import Fernet
from sqlalchemy import func, insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import ManualClock
from app.db.migrate import upgrade
from app.engines.ranktracking import ledger
from app.engines.ranktracking.claim.admission import RECURRING
from app.engines.ranktracking.claim.dispatch import dispatch_due
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import LedgerEntry, Run, Schedule
from app.engines.ranktracking.pricing import STANDARD
from app.platform.models import Organisation, Workspace
from app.settings import load_settings
from app.wiring import assemble

NOW = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)


async def create_database(base_url: str) -> str:
    url = make_url(base_url)
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


async def drop_database(db_url: str) -> None:
    url = make_url(db_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    await admin.dispose()


async def seed(runtime, schedules: int, orgs: int, *, name: str = "org") -> list[int]:  # type: ignore[no-untyped-def]
    """Organisations with a funded balance, and ``schedules`` due SERP schedules (bulk insert)."""
    org_ids: list[int] = []
    async with runtime.db.write() as uow:
        s = uow.session
        for i in range(orgs):
            org = Organisation(name=f"{name} {i}", created_at=NOW)
            s.add(org)
            await s.flush()
            ws = Workspace(
                organisation_id=org.id,
                name=f"ws {i}",
                timezone="UTC",
                ingest_token_hash=uuid.uuid4().hex,
                webhook_secret_encrypted=b"x",
                allow_private_http=False,
                created_at=NOW,
            )
            s.add(ws)
            await s.flush()
            org_ids.append(org.id)
            await ledger.top_up(
                s,
                organisation_id=org.id,
                workspace_id=ws.id,
                amount_micros=100_000_000_000,
                now=NOW,
            )
        workspaces = dict(
            (
                await s.execute(
                    select(Workspace.organisation_id, Workspace.id).where(
                        Workspace.organisation_id.in_(org_ids)
                    )
                )
            ).all()
        )
        rows = []
        for n in range(schedules):
            org_id = org_ids[n % orgs]
            rows.append(
                {
                    "workspace_id": workspaces[org_id],
                    "organisation_id": org_id,
                    "owner_user_id": None,
                    "name": f"schedule {n}",
                    "list_id": None,
                    "keywords": [f"keyword {n} {k}" for k in range(10)],
                    "data_type": "serp",
                    "frequency": "daily",
                    "depth": 10,
                    "location_code": 2840,
                    "language_code": "en",
                    "domain": "example.com",
                    "devices": "desktop",
                    "packages": None,
                    "monthly_cap_cents": 5000,
                    "status": "active",
                    "dedup_key": None,
                    "anchor_at": NOW - timedelta(days=1, minutes=20),
                    "next_due_at": NOW - timedelta(minutes=20 + n % 60),
                    "retrying": False,
                    "consecutive_blocks": 0,
                    "consecutive_failures": 0,
                    "created_at": NOW,
                    "updated_at": NOW,
                }
            )
        for start in range(0, len(rows), 1000):
            await s.execute(insert(Schedule), rows[start : start + 1000])
    return org_ids


async def baseline(runtime, org_ids: list[int], n: int, concurrency: int) -> float:  # type: ignore[no-untyped-def]
    """``n`` single-row ledger inserts, one transaction each, with the sweep's concurrency."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate, runtime.db.write() as uow:
            uow.session.add(
                LedgerEntry(
                    organisation_id=org_ids[i % len(org_ids)],
                    kind="topup",
                    amount_micros=1,
                    note="bench",
                    created_at=NOW,
                )
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started


async def one_per_transaction(runtime, org_ids: list[int], concurrency: int) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    """Admit the due schedules of ``org_ids`` one schedule per transaction (``admit_and_send`` for
    each, ``concurrency`` at a time): the dispatcher's earlier shape, on the same code."""
    async with runtime.db.read() as session:
        ids = list(
            (
                await session.execute(
                    select(Schedule.id).where(Schedule.organisation_id.in_(org_ids))
                )
            ).scalars()
        )
    gate = asyncio.Semaphore(concurrency)

    async def one(schedule_id: int) -> int:
        async with gate:
            launch = await admit_and_send(
                RankTrackingDeps.of(runtime),
                schedule_id,
                trigger=RECURRING,
                queue=STANDARD,
                now=NOW,
            )
            return launch.launched

    started = time.perf_counter()
    launched = sum(await asyncio.gather(*(one(i) for i in ids)))
    return launched, time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=5000)
    parser.add_argument("--single", type=int, default=1000)
    parser.add_argument("--orgs", type=int, default=50)
    parser.add_argument("--url", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    args = parser.parse_args()
    db_url = await create_database(args.url)
    try:
        await upgrade(db_url)
        settings = load_settings(
            {
                "DATABASE_URL": db_url,
                "ENCRYPTION_KEY": Fernet.generate_key().decode(),
                "SESSION_SECRET": "bench",
                "DATABASE_POOL_SIZE": "10",
            }
        )
        settings = dataclasses.replace(
            settings,
            ranktracking=dataclasses.replace(settings.ranktracking, dispatch_batch=args.schedules),
        )
        runtime = assemble(settings, ManualClock(NOW))
        concurrency = settings.ranktracking.dispatch_concurrency
        org_ids = await seed(runtime, args.schedules, args.orgs)
        single_orgs = await seed(runtime, args.single, args.orgs, name="single")

        # The baseline runs before and after the sweep; their mean is the figure (the machine's
        # load may drift while the sweep runs).
        before = await baseline(runtime, org_ids, args.schedules, concurrency)
        single_launched, single_seconds = await one_per_transaction(
            runtime, single_orgs, concurrency
        )
        started = time.perf_counter()
        report = await dispatch_due(RankTrackingDeps.of(runtime), NOW)
        sweep_seconds = time.perf_counter() - started
        after = await baseline(runtime, org_ids, args.schedules, concurrency)
        base_seconds = (before + after) / 2

        async with runtime.db.read() as session:
            runs = await session.scalar(
                select(func.count())
                .select_from(Run)
                .join(Schedule, Schedule.id == Run.schedule_id)
                .where(Run.status == "dispatching", Schedule.organisation_id.in_(org_ids))
            )
            jobs = await session.scalar(
                text("SELECT count(*) FROM jobs WHERE name = 'ranktracking.post_tasks'")
            )
            jobs -= single_launched
            negative = await session.scalar(
                text(
                    "SELECT count(*) FROM rt_balances WHERE credits_micros - settled_micros - reserved_micros < 0"
                )
            )
        await runtime.aclose()
        assert report.launched_runs == args.schedules == runs == jobs, (report, runs, jobs)
        assert negative == 0
        assert single_launched == args.single
        print(
            f"PostgreSQL, {args.schedules} due schedules in {args.orgs} organisations, concurrency {concurrency}"
        )
        print(
            f"  hourly sweep batch:          {sweep_seconds:7.2f} s  -> {args.schedules / sweep_seconds:8.0f} admissions/s"
        )
        print(
            f"  baseline ledger inserts:     {base_seconds:7.2f} s  -> "
            f"{args.schedules / base_seconds:8.0f} inserts/s (one row, one transaction each; "
            f"{before:.2f} s before and {after:.2f} s after the sweep)"
        )
        print(
            f"  one schedule per transaction:{single_seconds:7.2f} s  -> "
            f"{args.single / single_seconds:8.0f} admissions/s ({args.single} other schedules)"
        )
        print(f"  admission cost vs baseline:  {sweep_seconds / base_seconds:7.2f} x")
    finally:
        await drop_database(db_url)


if __name__ == "__main__":
    asyncio.run(main())
