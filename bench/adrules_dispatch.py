"""Ad rules dispatch benchmark.

1. Sweep over 10,000 active rules of which 100 are due: the time to claim the due ones (and an idle
   sweep right after, when nothing is due), with the query plan of the due-rules query. Baseline in
   the same run: the same query written with the status as a bound parameter, which a planner cannot
   match to the partial index (a full scan).
2. One rule over 20 ad accounts × 1,000 campaigns against the Graph API simulator on loopback: Graph
   calls made and wall time, with the accounts fetched concurrently; baseline in the same run: the
   same dispatch fetching one account at a time.

Run: ``/tmp/venv0/bin/python bench/adrules_dispatch.py`` (SQLite in a temporary file), or with
``BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres`` to use a fresh PostgreSQL
database created (and dropped) for the run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.fernet import Fernet
from sqlalchemy import insert, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import ManualClock
from app.db.migrate import upgrade
from app.db.session import Database
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.claim.due_rules import DUE as DUE_CLAIM
from app.engines.adrules.claim.due_rules import claim_due_rules
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import AdAccount, Rule, RuleAccount, Task
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.work.sheets_values import SheetCache
from app.integrations.meta.client import GraphClient
from app.integrations.sheets import SheetsClient
from app.platform import service
from app.platform.crypto import SecretBox
from app.sandbox.meta import GraphWorld, serve_world
from app.scheduling.jobs import JobContext, JobSpec
from app.scheduling.queue import DatabaseQueue
from app.settings import DatabaseSettings

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TOKEN = "bench-meta-token-0000000000"
RULES, DUE = 10_000, 100
ACCOUNTS, CAMPAIGNS = 20, 1_000
SCHEDULE = {"mode": "interval", "minutes": 15, "start_date": None, "end_date": None}
TASK = {
    "conditions": [
        {
            "type": "metric_value",
            "metric": "spend",
            "period": "today",
            "operator": "gt",
            "value": "1",
        }
    ],
    "group": "and",
    "action": {"type": "log_only"},
    "cooldown": "1h",
}


async def _unused(ctx: JobContext, payload: RunAccountPayload) -> None:
    raise AssertionError


JOB = JobSpec(RUN_ACCOUNT_JOB, RunAccountPayload, _unused)
UNUSED_SHEETS = SheetsClient("http://127.0.0.1:9")
"""The dispatch never reads a sheet (the account jobs do)."""


async def fresh_database() -> tuple[str, str | None]:
    base = os.environ.get("BENCH_DATABASE_URL", "")
    if not base:
        path = Path(tempfile.mkdtemp()) / "bench.db"
        return f"sqlite+aiosqlite:///{path}", None
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(
        make_url(base).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False), name


async def drop_database(name: str | None) -> None:
    if name is None:
        return
    base = os.environ["BENCH_DATABASE_URL"]
    admin = create_async_engine(
        make_url(base).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    await admin.dispose()


async def seed(db: Database, box: SecretBox) -> tuple[int, list[int]]:
    async with db.write() as uow:
        org = await service.create_organisation(uow.session, name="Bench", now=NOW)
        ws = (
            await service.create_workspace(
                uow.session, box, organisation_id=org.id, name="Bench", now=NOW
            )
        ).workspace
        await service.set_secret(
            uow.session, box, workspace_id=ws.id, name="meta_access_token", value=TOKEN, now=NOW
        )
        await uow.session.execute(
            insert(AdAccount),
            [
                {
                    "workspace_id": ws.id,
                    "meta_id": f"act_{9000 + i}",
                    "name": f"Bench {i}",
                    "currency": "EUR",
                    "timezone_name": "Europe/Berlin",
                    "account_status": 1,
                    "active": True,
                    "discovered_at": NOW,
                }
                for i in range(ACCOUNTS)
            ],
        )
    async with db.read() as session:
        account_ids = list(
            (
                await session.execute(text("SELECT id FROM adrules_ad_accounts ORDER BY id"))
            ).scalars()
        )
    return ws.id, account_ids


async def add_rules(db: Database, workspace_id: int, account_id: int) -> None:
    rows = []
    for i in range(RULES):
        due = i < DUE
        rows.append(
            {
                "workspace_id": workspace_id,
                "name": f"Rule {i}",
                # A realistic mix: most rules active and waiting, some drafts and paused ones.
                "status": "active" if due or i % 10 < 8 else ("draft" if i % 2 else "paused"),
                "prefilters": {"campaign_ids": [], "name_contains": None, "effective_status": None},
                "schedule": SCHEDULE,
                "next_execution_at": NOW - timedelta(seconds=5)
                if due
                else NOW + timedelta(minutes=1 + i % 600),
                "created_at": NOW,
                "updated_at": NOW,
            }
        )
    async with db.write() as uow:
        for start in range(0, len(rows), 2_000):
            await uow.session.execute(insert(Rule), rows[start : start + 2_000])
    async with db.write() as uow:
        ids = list((await uow.session.execute(text("SELECT id FROM adrules_rules"))).scalars())
        await uow.session.execute(
            insert(RuleAccount), [{"rule_id": r, "ad_account_id": account_id} for r in ids]
        )
        await uow.session.execute(
            insert(Task),
            [
                {
                    "rule_id": r,
                    "workspace_id": workspace_id,
                    "position": 0,
                    "name": "",
                    "document": TASK,
                    "created_at": NOW,
                    "updated_at": NOW,
                }
                for r in ids
            ],
        )


async def plan(db: Database, query: object) -> str:
    compiled = query.compile(  # type: ignore[attr-defined]
        dialect=db.write_engine.dialect, compile_kwargs={"literal_binds": True}
    )
    prefix = "EXPLAIN QUERY PLAN" if not db.is_postgres else "EXPLAIN"
    async with db.read() as session:
        rows = (await session.execute(text(f"{prefix} {compiled}"))).all()
    return "\n      ".join(str(r[-1]) for r in rows)


async def plan_sql(db: Database, sql: str, now: object) -> str:
    prefix = "EXPLAIN QUERY PLAN" if not db.is_postgres else "EXPLAIN"
    async with db.read() as session:
        rows = (
            await session.execute(text(f"{prefix} {sql}"), {"now": now, "status": "active"})
        ).all()
    return "\n      ".join(str(r[-1]) for r in rows)


async def timed_query(
    db: Database, sql: str, params: dict[str, object], runs: int = 20
) -> tuple[float, int]:
    times = []
    rows = 0
    async with db.read() as session:
        (await session.execute(text(sql), params)).all()  # warm the cache and the statement
        for _ in range(runs):
            started = time.perf_counter()
            rows = len((await session.execute(text(sql), params)).all())
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, rows


async def sweep_benchmark(db: Database, box: SecretBox, graph: GraphClient) -> None:
    workspace_id, accounts = await seed(db, box)
    await add_rules(db, workspace_id, accounts[0])
    async with db.write() as uow:  # fresh planner statistics after the bulk load
        await uow.session.execute(text("ANALYZE"))
    clock = ManualClock(NOW)
    # The claim's own due predicate and order, as the primitive compiles them into its statement.
    now_param = NOW if db.is_postgres else NOW.replace(tzinfo=None).isoformat(sep=" ")
    due_sql = (
        f"SELECT id FROM adrules_rules WHERE {DUE_CLAIM.due} "
        f"ORDER BY {DUE_CLAIM.order_by} LIMIT 500"
    )
    print(f"  plan (due-rules claim):\n      {await plan_sql(db, due_sql, now_param)}")
    # Baseline: the status as a bound parameter cannot be matched to the partial index.
    indexed = (
        "SELECT id FROM adrules_rules WHERE status = 'active' AND next_execution_at <= :now "
        "ORDER BY next_execution_at LIMIT 500"
    )
    # ``status || ''`` is an expression, not the column: no planner can match it to the index.
    unindexed = (
        "SELECT id FROM adrules_rules WHERE status || '' = :status AND next_execution_at <= :now "
        "ORDER BY next_execution_at LIMIT 500"
    )
    slow, slow_rows = await timed_query(db, unindexed, {"now": now_param, "status": "active"})
    fast, fast_rows = await timed_query(db, indexed, {"now": now_param})
    assert fast_rows == slow_rows == DUE, (fast_rows, slow_rows)
    print(f"  plan (baseline):\n      {await plan_sql(db, unindexed, now_param)}")
    print(
        f"  due-rules select ({DUE} rows), median of 20: {fast:.2f} ms with the partial index; "
        f"baseline full scan {slow:.2f} ms"
    )

    deps = AdRulesDeps(
        db=db,
        queue=DatabaseQueue(db, clock),
        clock=clock,
        secrets=box,
        graph=graph,
        sheets=UNUSED_SHEETS,
        sheet_cache=SheetCache(),
        job=JOB,
        sleep=clock.sleep,
    )
    started = time.perf_counter()
    claimed = await claim_due_rules(db, NOW, 500)
    claim_ms = (time.perf_counter() - started) * 1000
    assert len(claimed) == DUE, len(claimed)
    idle = []
    for _ in range(20):
        started = time.perf_counter()
        summary = await dispatch_due(deps, NOW, clock.now)
        idle.append((time.perf_counter() - started) * 1000)
        assert summary.rules == 0
    print(f"  claim of the {DUE} due rules among {RULES:,} (one transaction): {claim_ms:.1f} ms")
    print(
        f"  idle sweep (nothing due, claim + cleanup), median of 20: {statistics.median(idle):.2f} ms"
    )
    async with db.write() as uow:  # leave nothing due for the next part
        await uow.session.execute(update(Rule).values(status="paused"))


async def fanout_benchmark(
    db: Database, box: SecretBox, graph: GraphClient, world: GraphWorld
) -> None:
    async with db.read() as session:
        workspace_id = (await session.execute(text("SELECT id FROM workspaces"))).scalar_one()
        accounts = list(
            (
                await session.execute(
                    text("SELECT id, meta_id FROM adrules_ad_accounts ORDER BY id")
                )
            ).all()
        )
    for _, meta_id in accounts:
        world.add_account(meta_id, meta_id, currency="EUR")
        world.add_campaigns(meta_id, CAMPAIGNS)
        world.grant(TOKEN, meta_id)

    async def one_run(concurrency: int) -> tuple[float, int, int]:
        clock = ManualClock(NOW)
        async with db.write() as uow:
            rule_id = (
                await uow.session.execute(
                    insert(Rule).returning(Rule.id),
                    [
                        {
                            "workspace_id": workspace_id,
                            "name": "Fan-out",
                            "status": "active",
                            "prefilters": {
                                "campaign_ids": [],
                                "name_contains": None,
                                "effective_status": None,
                            },
                            "schedule": SCHEDULE,
                            "next_execution_at": NOW,
                            "created_at": NOW,
                            "updated_at": NOW,
                        }
                    ],
                )
            ).scalar_one()
            await uow.session.execute(
                insert(RuleAccount), [{"rule_id": rule_id, "ad_account_id": a} for a, _ in accounts]
            )
            await uow.session.execute(
                insert(Task),
                [
                    {
                        "rule_id": rule_id,
                        "workspace_id": workspace_id,
                        "position": 0,
                        "name": "",
                        "document": TASK,
                        "created_at": NOW,
                        "updated_at": NOW,
                    }
                ],
            )
        deps = AdRulesDeps(
            db=db,
            queue=DatabaseQueue(db, clock),
            clock=clock,
            secrets=box,
            graph=graph,
            sheets=UNUSED_SHEETS,
            sheet_cache=SheetCache(),
            job=JOB,
            sleep=clock.sleep,
            fetch_concurrency=concurrency,
        )
        world.state.reset_counts()
        started = time.perf_counter()
        summary = await dispatch_due(deps, NOW, clock.now)
        elapsed = time.perf_counter() - started
        async with db.write() as uow:
            await uow.session.execute(
                update(Rule).where(Rule.id == rule_id).values(status="paused")
            )
        return elapsed, world.count("campaigns.list"), summary.jobs

    def median_run(runs: list[tuple[float, int, int]]) -> tuple[float, int, int]:
        return sorted(runs)[len(runs) // 2]

    sequential = median_run([await one_run(1) for _ in range(3)])
    concurrent = median_run([await one_run(16) for _ in range(3)])
    print("  (median of 3 runs each)")
    for label, (elapsed, calls, jobs) in (
        ("baseline, one account at a time", sequential),
        ("accounts fetched concurrently (16)", concurrent),
    ):
        print(
            f"  {label}: {elapsed * 1000:.0f} ms wall, {calls} Graph calls, {jobs} jobs, "
            f"{ACCOUNTS * CAMPAIGNS:,} campaigns"
        )


async def main() -> None:
    url, created = await fresh_database()
    try:
        await upgrade(url)
        db = Database(DatabaseSettings(url=url))
        box = SecretBox(Fernet.generate_key().decode())
        world = GraphWorld()
        server = serve_world(world)
        graph = GraphClient(server.url, "v21.0")
        print(f"database: {db.dialect}")
        try:
            print(f"1. sweep over {RULES:,} rules, {DUE} due")
            await sweep_benchmark(db, box, graph)
            print(
                f"2. one rule over {ACCOUNTS} accounts x {CAMPAIGNS:,} campaigns (simulator on loopback)"
            )
            await fanout_benchmark(db, box, graph, world)
        finally:
            await graph.aclose()
            server.stop()
            await db.dispose()
    finally:
        await drop_database(created)


if __name__ == "__main__":
    asyncio.run(main())
