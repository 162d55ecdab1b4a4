"""Funnels runner throughput on PostgreSQL, beside raw lease + update loops measured in the same run.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \
        /tmp/venv0/bin/python bench/funnels_runner.py [--runs 100000] [--due 20000] [--workers 4]

It creates its own database, migrates it, and puts ``--runs`` runs in flight in one funnel, of
which ``--due`` are due now. Printed:

* raw baselines: ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING`` with
  one commit per statement, 1 row and 100 rows per statement, ``--workers`` connections, on a
  plain table with a partial index on the leasable rows;
* run-steps per second of the real runner with ``--workers`` tasks: each due run executes a
  condition, a join, a send_email (an outbox row) and a wait (four steps) and goes back to sleep;
* contacts entering per second: ``contact_created`` events matched to the funnel by
  ``--workers`` matcher tasks (trigger match, entry, run insert);
* the lease query's plan and estimated cost with 10,000 and with ``--runs`` runs in the table.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from server_cpu import postgres_cpu_seconds
from sqlalchemy import insert, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app import event_loop
from app.db.migrate import upgrade
from app.db.session import Database
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import Contact, Funnel, FunnelVersion
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.work.runner import Runner
from app.heap import freeze_startup_heap
from app.platform.models import Organisation, Workspace
from app.settings import DatabaseSettings, FunnelSettings

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
GRAPH: dict[str, Any] = {
    "triggers": [{"kind": "contact_created"}],
    "nodes": [
        {
            "kind": "condition",
            "id": "c",
            "entry": True,
            "predicate": {"kind": "field", "field": "first_name", "op": "eq", "value": "VIP"},
            "yes": "j",
            "no": "j",
        },
        {"kind": "join", "id": "j", "next": "mail"},
        {
            "kind": "send_email",
            "id": "mail",
            "subject": "Hi {{first_name}}",
            "body": "Hello",
            "next": "w",
        },
        {"kind": "wait", "id": "w", "days": 1},
    ],
}


async def create_database(base: str) -> str:
    url = make_url(base)
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


def dsn(db_url: str) -> str:
    return make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)


# -- raw baseline ------------------------------------------------------------------------------


async def raw_loop(db_url: str, rows: int, per_statement: int, workers: int) -> float:
    """Rows leased and updated per second by ``workers`` connections, one commit per statement."""
    conn = await asyncpg.connect(dsn(db_url))
    await conn.execute("DROP TABLE IF EXISTS bench_raw")
    await conn.execute(
        "CREATE TABLE bench_raw (id bigserial primary key, wake_at timestamptz not null,"
        " owner text, status text not null default 'active')"
    )
    await conn.execute(
        "INSERT INTO bench_raw (wake_at) SELECT now() - interval '1 minute' FROM generate_series(1, $1)",
        rows,
    )
    await conn.execute("CREATE INDEX ON bench_raw (wake_at) WHERE status = 'active'")
    await conn.execute("ANALYZE bench_raw")
    await conn.close()
    sql = (
        "UPDATE bench_raw SET owner = $1, wake_at = now() + interval '1 day' WHERE id IN ("
        " SELECT id FROM bench_raw WHERE status = 'active' AND wake_at <= now()"
        " ORDER BY wake_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id"
    )

    async def worker(i: int) -> int:
        c = await asyncpg.connect(dsn(db_url))
        done = 0
        while True:
            got = await c.fetch(sql, f"w{i}", per_statement)
            if not got:
                break
            done += len(got)
        await c.close()
        return done

    started = time.perf_counter()
    total = sum(await asyncio.gather(*(worker(i) for i in range(workers))))
    return total / (time.perf_counter() - started)


# -- the engine --------------------------------------------------------------------------------


async def seed(db: Database, runs: int, due: int) -> tuple[int, FunnelVersion]:
    async with db.write() as uow:
        s = uow.session
        org = Organisation(name="bench", created_at=NOW)
        s.add(org)
        await s.flush()
        ws = Workspace(
            organisation_id=org.id,
            name="bench",
            timezone="UTC",
            ingest_token_hash=uuid.uuid4().hex,
            webhook_secret_encrypted=b"-",
            allow_private_http=False,
            created_at=NOW,
        )
        s.add(ws)
        await s.flush()
        funnel = Funnel(
            workspace_id=ws.id,
            name="bench",
            draft=GRAPH,
            active=True,
            created_at=NOW,
            updated_at=NOW,
        )
        s.add(funnel)
        await s.flush()
        version = FunnelVersion(
            funnel_id=funnel.id,
            workspace_id=ws.id,
            number=1,
            definition=GRAPH,
            reentry=False,
            published_at=NOW,
        )
        s.add(version)
        await s.flush()
        funnel.current_version_id = version.id
        workspace_id = ws.id
    async with db.write() as uow:
        # Made by the database from a series (a million rows in seconds, not minutes of
        # parameters): the same rows the runner reads, ``first_name`` VIP for every seventh.
        await uow.session.execute(
            text(
                "INSERT INTO contacts (workspace_id, email, first_name, last_name, timezone,"
                " fields, consent, suppressed, created_at, updated_at)"
                " SELECT :ws, 'c' || (n - 1) || '@bench.test',"
                " CASE WHEN (n - 1) % 7 = 0 THEN 'VIP' ELSE 'Ann' END, '', 'UTC',"
                " '{}', '{}', '{}', :now, :now FROM generate_series(1, :runs) AS n"
            ),
            {"ws": workspace_id, "now": NOW, "runs": runs},
        )
    async with db.write() as uow:
        # The first ``due`` runs are due now at the entry; the rest wait (in flight, asleep).
        await uow.session.execute(
            text(
                "INSERT INTO funnel_runs (workspace_id, funnel_id, version_id, contact_id, reentry,"
                " status, current_node, wake_at, context, step_count, failures, entered_at, updated_at)"
                " SELECT workspace_id, :f, :v, id, false, 'active',"
                " CASE WHEN row_number() OVER (ORDER BY id) <= :due THEN 'c' ELSE 'w' END,"
                " CASE WHEN row_number() OVER (ORDER BY id) <= :due THEN CAST(:now AS timestamptz)"
                " ELSE CAST(:later AS timestamptz) END, '{}', 0, 0, :now, :now FROM contacts"
            ),
            {
                "f": version.funnel_id,
                "v": version.id,
                "due": due,
                "now": NOW,
                "later": NOW + timedelta(days=3),
            },
        )
        await uow.session.execute(text("ANALYZE funnel_runs"))
    # A table that has been in service is vacuumed: without this the first reads of a million
    # fresh rows pay for setting their hint bits, which a measurement should not count.
    async with db.write_engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text("VACUUM ANALYZE funnel_runs, contacts"))
    return workspace_id, version


async def loop_lag(lags: list[float]) -> None:
    """How late a 1 ms timer fires, again and again: how long the loop's other work (here the
    runner) keeps a task such as an SMTP exchange or an HTTP answer waiting for its turn."""
    while True:
        began = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - began - 0.001)


async def steps_per_second(db: Database, workers: int, batch: int) -> tuple[float, int]:
    runner = Runner(
        db,
        FunnelSettings(runner_batch=batch, lease_seconds=300),
        mail_domain="bench.test",
        executors=EXECUTORS,
    )

    async def drain(i: int) -> int:
        steps = 0
        while True:
            result = await runner.run_batch(owner=f"bench-{i}", now=NOW)
            steps += result.steps
            if result.leased == 0:
                return steps

    # As the worker process does once it has started (app.heap): the measured loop's full
    # collections then walk what it made, not the start-up heap and the seeded data's leftovers.
    freeze_startup_heap()
    lags: list[float] = []
    watcher = asyncio.create_task(loop_lag(lags))
    started, cpu, server = time.perf_counter(), time.process_time(), postgres_cpu_seconds()
    total = sum(await asyncio.gather(*(drain(i) for i in range(workers))))
    wall = time.perf_counter() - started
    watcher.cancel()
    lags.sort()
    print(
        f"event loop held up to {lags[-1] * 1e3:.1f} ms at a time while the runner ran "
        f"(p50 {lags[len(lags) // 2] * 1e3:.2f} ms, p99 {lags[len(lags) * 99 // 100] * 1e3:.1f} ms)"
    )
    cpu, server = time.process_time() - cpu, postgres_cpu_seconds() - server
    runs = max(total, 1) / 4
    print(
        f"runner process {cpu / wall:.0%} of a core, {cpu / runs * 1e6:.0f} µs of CPU a run; "
        f"PostgreSQL {server / wall:.0%}, {server / runs * 1e6:.0f} µs a run"
    )
    return total / wall, total


async def entering_per_second(db: Database, workspace_id: int, count: int, workers: int) -> float:
    async with db.write() as uow:
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": workspace_id,
                    "email": f"new{i}@bench.test",
                    "first_name": "New",
                    "last_name": "",
                    "timezone": "UTC",
                    "fields": {},
                    "consent": {},
                    "suppressed": {},
                    "created_at": NOW,
                    "updated_at": NOW,
                }
                for i in range(count)
            ],
        )
        ids = list(
            await uow.session.scalars(text("SELECT id FROM contacts WHERE email LIKE 'new%'"))
        )
        for cid in ids:
            await record_event(
                uow.session,
                workspace_id=workspace_id,
                contact_id=cid,
                name="contact_created",
                source="system",
                now=NOW,
            )

    async def matcher() -> int:
        started_runs = 0
        while True:
            events, started = await match_events(db, now=NOW, limit=500, segments=evaluate_segments)
            started_runs += started
            if events == 0:
                return started_runs

    started = time.perf_counter()
    entered = sum(await asyncio.gather(*(matcher() for _ in range(workers))))
    assert entered == count, (entered, count)
    return entered / (time.perf_counter() - started)


LEASE_EXPLAIN = (
    "EXPLAIN (FORMAT JSON) UPDATE funnel_runs SET lease_owner = 'x' WHERE id = ANY(ARRAY("
    " SELECT id FROM funnel_runs WHERE status = 'active' AND wake_at <= '2026-03-02 09:00+00'"
    " ORDER BY wake_at LIMIT 200 FOR UPDATE SKIP LOCKED)) RETURNING id"
)
"""The runner's lease statement (app.engines.funnels.runs.work.runner) with literal values."""


async def lease_plan(db_url: str) -> tuple[float, str]:
    conn = await asyncpg.connect(dsn(db_url))
    raw = await conn.fetchval(LEASE_EXPLAIN)
    await conn.close()
    plan = json.loads(raw)[0]["Plan"]
    names: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        label = node["Node Type"]
        if "Index Name" in node:
            label += f" on {node['Index Name']}"
        names.append(label)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan)
    return float(plan["Total Cost"]), " > ".join(names)


TABLES = "funnel_runs, contacts, funnels, funnel_versions, workspaces, organisations"


async def compare_sizes(url: str, args: argparse.Namespace) -> None:
    """The same drain (``--due`` runs due, four steps each) with ``--runs`` and with
    ``--compare-runs`` runs in flight, rounds alternating, each on a freshly seeded table."""
    db = Database(DatabaseSettings(url=url, pool_size=args.workers + 2))
    rates: dict[int, list[float]] = {args.runs: [], args.compare_runs: []}
    try:
        for _ in range(args.rounds):
            for runs in rates:
                async with db.write() as uow:
                    await uow.session.execute(text(f"TRUNCATE {TABLES}, funnel_outbox CASCADE"))
                began = time.perf_counter()
                await seed(db, runs, args.due)
                seeded = time.perf_counter() - began
                cost, plan = await lease_plan(url)
                rate, steps = await steps_per_second(db, args.workers, args.batch)
                rates[runs].append(rate)
                print(
                    f"  {runs:>9,} runs in flight ({args.due:,} due): {rate:,.0f} run-steps/s "
                    f"({steps:,} steps; seeded in {seeded:.0f} s; lease cost {cost:.2f}, {plan})",
                    flush=True,
                )
    finally:
        await db.dispose()
    small, big = (statistics.median(rates[n]) for n in rates)
    print(
        f"runner, median of {args.rounds} rounds: {args.runs:,} runs {small:,.0f} run-steps/s, "
        f"{args.compare_runs:,} runs {big:,.0f} run-steps/s, ratio {big / small:.2f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--entering", type=int, default=5_000)
    parser.add_argument("--profile", default=None, help="write a cProfile of the runner's drain")
    parser.add_argument(
        "--compare-runs",
        type=int,
        default=0,
        help="the drain with --runs and with this many runs in flight, --rounds rounds alternating",
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    url = await create_database(base)
    try:
        await upgrade(url)
        if args.compare_runs:
            await compare_sizes(url, args)
            return
        print(
            f"raw lease+update, 1 row/statement, {args.workers} connections: "
            f"{await raw_loop(url, 20_000, 1, args.workers):,.0f} rows/s"
        )
        print(
            f"raw lease+update, 100 rows/statement, {args.workers} connections: "
            f"{await raw_loop(url, 200_000, 100, args.workers):,.0f} rows/s"
        )
        db = Database(DatabaseSettings(url=url, pool_size=args.workers + 2))
        small_cost = None
        workspace_id, _ = await seed(db, 10_000, 2_000)
        small_cost, small_plan = await lease_plan(url)
        async with db.write() as uow:
            await uow.session.execute(
                text(
                    "TRUNCATE funnel_runs, contacts, funnels, funnel_versions, workspaces, organisations CASCADE"
                )
            )
        workspace_id, _ = await seed(db, args.runs, args.due)
        big_cost, big_plan = await lease_plan(url)
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        rate, steps = await steps_per_second(db, args.workers, args.batch)
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.profile)
        print(
            f"runner, {args.workers} worker tasks, batch {args.batch}, {args.runs:,} runs in flight "
            f"({args.due:,} due, 4 steps each): {rate:,.0f} run-steps/s ({steps:,} steps)"
        )
        entering = await entering_per_second(db, workspace_id, args.entering, args.workers)
        print(
            f"contacts entering (contact_created matched by {args.workers} matchers): {entering:,.0f}/s"
        )
        print(f"lease query with 10,000 runs:  cost {small_cost:.2f}  plan {small_plan}")
        print(f"lease query with {args.runs:,} runs: cost {big_cost:.2f}  plan {big_plan}")
        await db.dispose()
    finally:
        await drop_database(url)


if __name__ == "__main__":
    # The loop the worker process runs on, so the figures are the deployed ones.
    event_loop.run(main())
