"""Ad rules worker benchmark: one rule run over 10,000 campaigns × 2 tasks (3 reporting periods)
across 20 ad accounts against the Graph API simulator on loopback.

Two ways of reading Insights, on the same data, both producing identical records:

* ``per_campaign`` — the baseline (the seed's figure): one Graph batch call per campaign, one
  sub-request per period;
* ``packed`` — the sub-requests of 16 campaigns packed into each batch call of ≤ 50 items;
* ``account`` — account-level Insights with ``level=campaign``: one paged request per period and
  500 campaigns.

Printed per mode: Graph HTTP calls and sub-requests per campaign, end-to-end wall time (all 20
account jobs, 4 at a time as a worker with 4 slots would run them, records written), and the time
per campaign. The simulator runs in this process (its own thread), so its work is part of the wall
time of both modes alike.

Writes (run first): a rule raising every object's budget on ``--write-objects`` (10,000) objects at
campaign and at ad-set level; per level, HTTP calls per object-period for the Insights read and
HTTP calls per written object (live re-reads and writes), batched (≤ 50 a call) beside the
per-object baseline (each object's re-read and write in calls of their own) in the same run.
``--only reads`` / ``--only writes`` runs one part.

Run: ``/tmp/venv0/bin/python bench/adrules_worker.py`` (SQLite in a temporary file), or with
``BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres`` for a fresh PostgreSQL
database created and dropped for the run. ``--campaigns`` and ``--accounts`` change the size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
from cryptography.fernet import Fernet
from sqlalchemy import delete, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.db.session import Database
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.adrules.models import AdAccount, Batch, Rule, RuleAccount, Task
from app.engines.adrules.payloads import AccountRef, CampaignEntity, RunAccountPayload, seal_token
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    AppendToName,
    IncreaseBudget,
    LogOnly,
    MetricMetricCondition,
    MetricValueCondition,
    PreFilters,
    RuleDocument,
    TaskDocument,
    TaskIn,
)
from app.engines.adrules.work.account import run_account_job
from app.engines.adrules.work.batched import BatchStats
from app.engines.adrules.work.sheets_values import SheetCache
from app.integrations.meta.client import GraphClient
from app.integrations.sheets import SheetsClient
from app.platform import service
from app.platform.crypto import SecretBox
from app.sandbox.meta import GraphWorld, serve_world
from app.scheduling.queue import DatabaseQueue
from app.settings import DatabaseSettings

TOKEN = "bench-token-0123456789"
TASKS = [
    TaskIn(
        name="Pause losers",
        conditions=[
            MetricValueCondition(
                metric="purchase_roas", period="last_7d", operator="lt", value=Decimal("1.5")
            ),
            MetricValueCondition(metric="spend", period="today", operator="gt", value=Decimal(5)),
        ],
        group="and",
        action=LogOnly(),
        cooldown="1h",
    ),
    TaskIn(
        name="Cheaper than last week",
        conditions=[
            MetricMetricCondition(
                metric="cpc",
                period="yesterday",
                operator="lt",
                other_metric="cpc",
                other_period="last_7d",
            ),
        ],
        action=LogOnly(),
        cooldown="1h",
    ),
]


async def _fresh_database() -> tuple[str, str | None]:
    base = os.environ.get("BENCH_DATABASE_URL", "")
    if not base:
        path = Path(tempfile.mkdtemp()) / "bench.db"
        return f"sqlite+aiosqlite:///{path}", None
    url = make_url(base)
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False), name


async def _drop(base: str, name: str) -> None:
    admin = create_async_engine(
        make_url(base).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    await admin.dispose()


async def _setup(
    db: Database, box: SecretBox, world: GraphWorld, accounts: int, per_account: int
) -> tuple[int, list[tuple[AccountRef, list[CampaignEntity]]], RuleDocument]:
    now = datetime.now(UTC)
    async with db.write() as uow:
        org = await service.create_organisation(uow.session, name="Bench", now=now)
        ws = (
            await service.create_workspace(
                uow.session, box, organisation_id=org.id, name="Bench", now=now
            )
        ).workspace
        rule = Rule(
            workspace_id=ws.id,
            name="Bench rule",
            status="active",
            prefilters={},
            schedule={"mode": "interval", "minutes": 60},
            created_at=now,
            updated_at=now,
        )
        uow.session.add(rule)
        await uow.session.flush()
        docs = []
        for position, task in enumerate(TASKS):
            body = msgspec.to_builtins(task)
            body.pop("id", None)
            name = body.pop("name")
            row = Task(
                rule_id=rule.id,
                workspace_id=ws.id,
                position=position,
                name=name,
                document=body,
                created_at=now,
                updated_at=now,
            )
            uow.session.add(row)
            await uow.session.flush()
            docs.append(msgspec.convert({**body, "id": row.id, "name": name}, TaskDocument))
        jobs = []
        for a in range(accounts):
            meta_id = f"act_{500 + a}"
            world.add_account(meta_id, f"Account {a}", currency="USD", timezone_name="UTC")
            world.add_campaigns(meta_id, per_account)
            account = AdAccount(
                workspace_id=ws.id,
                meta_id=meta_id,
                name=meta_id,
                currency="USD",
                timezone_name="UTC",
                account_status=1,
                active=True,
                discovered_at=now,
                activated_at=now,
            )
            uow.session.add(account)
            await uow.session.flush()
            uow.session.add(RuleAccount(rule_id=rule.id, ad_account_id=account.id))
            entities = [
                CampaignEntity(
                    id=c.id,
                    name=c.name,
                    effective_status=c.effective_status,
                    daily_budget=c.daily_budget,
                    created_time=c.created_time,
                )
                for c in world.accounts[meta_id].campaigns.values()
            ]
            jobs.append(
                (
                    AccountRef(id=account.id, meta_id=meta_id, currency="USD", timezone_name="UTC"),
                    entities,
                )
            )
        world.grant(TOKEN, *world.accounts)
    document = RuleDocument(
        id=rule.id,
        workspace_id=ws.id,
        name=rule.name,
        timezone="UTC",
        prefilters=PreFilters(),
        tasks=docs,
        updated_at=now,
    )
    return ws.id, jobs, document


async def _run_mode(
    mode: str,
    db: Database,
    box: SecretBox,
    world: GraphWorld,
    graph: GraphClient,
    sheets: SheetsClient,
    workspace_id: int,
    jobs: list[tuple[AccountRef, list[CampaignEntity]]],
    document: RuleDocument,
    slots: int,
) -> dict[str, float]:
    clock = SystemClock()
    batch_id = uuid.uuid4().hex
    payloads = []
    async with db.write() as uow:
        for account, entities in jobs:
            batch = Batch(
                batch_id=batch_id,
                workspace_id=workspace_id,
                rule_id=document.id,
                ad_account_id=account.id,
                account_meta_id=account.meta_id,
                status="queued",
                entities=len(entities),
                pages=1,
                fetch_attempts=1,
                executed=0,
                not_executed=0,
                skipped=0,
                errors=0,
                tick_at=clock.now(),
                created_at=clock.now(),
            )
            uow.session.add(batch)
            await uow.session.flush()
            payloads.append(
                RunAccountPayload(
                    batch_id=batch_id,
                    batch_record_id=batch.id,
                    workspace_id=workspace_id,
                    rule=document,
                    account=account,
                    entities=entities,
                    access_token_encrypted=seal_token(box, TOKEN),
                    dispatched_at=clock.now(),
                )
            )
    deps = AdRulesDeps(
        db=db,
        queue=DatabaseQueue(db, clock),
        clock=clock,
        secrets=box,
        graph=graph,
        sheets=sheets,
        sheet_cache=SheetCache(),
        job=RUN_ACCOUNT,
        sleep=asyncio.sleep,
        insights_mode=mode,
    )
    world.state.reset_counts()
    gate = asyncio.Semaphore(slots)

    async def one(payload: RunAccountPayload) -> str:
        async with gate:
            return await run_account_job(deps, payload)

    started = time.perf_counter()
    statuses = await asyncio.gather(*(one(p) for p in payloads))
    wall = time.perf_counter() - started
    assert set(statuses) == {"completed"}, statuses
    campaigns = sum(len(e) for _, e in jobs)
    async with db.read() as session:
        records = await session.scalar(
            select(func.count())
            .select_from(ExecutionRecord)
            .where(ExecutionRecord.batch_id == batch_id)
        )
        outcome = (
            await session.execute(
                select(
                    ExecutionRecord.campaign_id,
                    ExecutionRecord.task_id,
                    ExecutionRecord.status,
                    ExecutionRecord.conditions,
                )
                .where(ExecutionRecord.batch_id == batch_id)
                .order_by(ExecutionRecord.campaign_id, ExecutionRecord.task_id)
            )
        ).all()
    assert records == campaigns * len(TASKS)
    # Forget this run so the next mode starts from the same state (no cooldown from this one).
    async with db.write() as uow:
        await uow.session.execute(
            delete(ExecutionRecord).where(ExecutionRecord.batch_id == batch_id)
        )
    return {
        # Batch calls; an account-level read is a plain GET (counted as "insights" by the simulator).
        "calls": world.count("batch") if mode != "account" else world.count("insights"),
        "items": world.count("insights") if mode != "account" else 0,
        "wall": wall,
        "campaigns": campaigns,
        "records": records,
        "outcome": hash(
            tuple(
                (c, t, s, str([(x["seen"], x["passed"]) for x in cond]))
                for c, t, s, cond in outcome
            )
        ),
    }


RAISE = TaskIn(
    name="Raise every budget",
    conditions=[
        MetricValueCondition(metric="spend", period="today", operator="gte", value=Decimal(0))
    ],
    action=IncreaseBudget(by="percent", amount=Decimal(10), max=Decimal(1_000_000)),
    cooldown="15m",
)
TAG = TaskIn(
    name="Tag every name",
    conditions=RAISE.conditions,
    action=AppendToName(text="[run 0]"),
    cooldown="15m",
)


async def _setup_writes(
    db: Database,
    box: SecretBox,
    world: GraphWorld,
    level: str,
    accounts: int,
    per_account: int,
    tasks: tuple[TaskIn, ...] = (RAISE,),
    first_account: int | None = None,
) -> tuple[int, list[tuple[AccountRef, list[CampaignEntity]]], RuleDocument]:
    """A rule at ``level`` with ``tasks`` (default: raise every object's budget); at ad-set level
    the accounts budget on ad sets (campaigns without a budget, two ad sets each)."""
    now = datetime.now(UTC)
    async with db.write() as uow:
        org = await service.create_organisation(uow.session, name=f"Writes {level}", now=now)
        ws = (
            await service.create_workspace(
                uow.session, box, organisation_id=org.id, name=level, now=now
            )
        ).workspace
        rule = Rule(
            workspace_id=ws.id,
            name=f"Raise at {level} level",
            status="active",
            level=level,
            prefilters={},
            schedule={"mode": "interval", "minutes": 60},
            created_at=now,
            updated_at=now,
        )
        uow.session.add(rule)
        await uow.session.flush()
        docs = []
        for position, given in enumerate(tasks):
            body = msgspec.to_builtins(given)
            body.pop("id", None)
            name = body.pop("name")
            task = Task(
                rule_id=rule.id,
                workspace_id=ws.id,
                position=position,
                name=name,
                document=body,
                created_at=now,
                updated_at=now,
            )
            uow.session.add(task)
            await uow.session.flush()
            docs.append(msgspec.convert({**body, "id": task.id, "name": name}, TaskDocument))
        jobs = []
        base = first_account if first_account is not None else (7000 if level == "adset" else 6000)
        for a in range(accounts):
            meta_id = f"act_{base + a}"
            world.add_account(meta_id, f"Account {a}", currency="USD", timezone_name="UTC")
            if level == "adset":
                parents = world.add_campaigns(meta_id, per_account // 2, daily_budget=None)
                for i in range(per_account):
                    world.add_child(
                        meta_id,
                        "adsets",
                        f"{meta_id.removeprefix('act_')}{i:06d}",
                        campaign_id=parents[i // 2].id,
                        daily_budget=5000,
                    )
            else:
                world.add_campaigns(meta_id, per_account)
            account = AdAccount(
                workspace_id=ws.id,
                meta_id=meta_id,
                name=meta_id,
                currency="USD",
                timezone_name="UTC",
                account_status=1,
                active=True,
                discovered_at=now,
                activated_at=now,
            )
            uow.session.add(account)
            await uow.session.flush()
            uow.session.add(RuleAccount(rule_id=rule.id, ad_account_id=account.id))
            objects = world.accounts[meta_id].edge("adsets" if level == "adset" else "campaigns")
            entities = [
                CampaignEntity(
                    id=c.id,
                    name=c.name,
                    effective_status=c.effective_status,
                    daily_budget=c.daily_budget,
                    created_time=c.created_time,
                )
                for c in objects.values()
            ]
            jobs.append(
                (
                    AccountRef(id=account.id, meta_id=meta_id, currency="USD", timezone_name="UTC"),
                    entities,
                )
            )
        world.grant(TOKEN, *world.accounts)
    document = RuleDocument(
        id=rule.id,
        workspace_id=ws.id,
        name=rule.name,
        timezone="UTC",
        prefilters=PreFilters(),
        tasks=docs,
        updated_at=now,
        level=level,  # type: ignore[arg-type]
    )
    return ws.id, jobs, document


async def _run_writes(
    batch_size: int,
    db: Database,
    box: SecretBox,
    world: GraphWorld,
    graph: GraphClient,
    sheets: SheetsClient,
    setup: tuple[int, list[tuple[AccountRef, list[CampaignEntity]]], RuleDocument],
    slots: int,
) -> dict[str, float]:
    """One run raising every object's budget: the Insights read packed, the live re-reads and
    the writes in batch calls of ``batch_size`` objects (1: each object's own calls)."""
    workspace_id, jobs, document = setup
    stats = BatchStats()
    clock = SystemClock()
    batch_id = uuid.uuid4().hex
    payloads = []
    async with db.write() as uow:
        for account, entities in jobs:
            batch = Batch(
                batch_id=batch_id,
                workspace_id=workspace_id,
                rule_id=document.id,
                ad_account_id=account.id,
                account_meta_id=account.meta_id,
                status="queued",
                entities=len(entities),
                pages=1,
                fetch_attempts=1,
                executed=0,
                not_executed=0,
                skipped=0,
                errors=0,
                tick_at=clock.now(),
                created_at=clock.now(),
            )
            uow.session.add(batch)
            await uow.session.flush()
            payloads.append(
                RunAccountPayload(
                    batch_id=batch_id,
                    batch_record_id=batch.id,
                    workspace_id=workspace_id,
                    rule=document,
                    account=account,
                    entities=entities,
                    access_token_encrypted=seal_token(box, TOKEN),
                    dispatched_at=clock.now(),
                )
            )
    deps = AdRulesDeps(
        db=db,
        queue=DatabaseQueue(db, clock),
        clock=clock,
        secrets=box,
        graph=graph,
        sheets=sheets,
        sheet_cache=SheetCache(),
        job=RUN_ACCOUNT,
        sleep=asyncio.sleep,
        insights_mode="packed",
        write_batch_size=batch_size,
        write_stats=stats,
    )
    world.state.reset_counts()
    world.batch_calls.clear()
    gate = asyncio.Semaphore(slots)

    async def one(payload: RunAccountPayload) -> str:
        async with gate:
            return await run_account_job(deps, payload)

    started = time.perf_counter()
    statuses = await asyncio.gather(*(one(p) for p in payloads))
    wall = time.perf_counter() - started
    assert set(statuses) == {"completed"}, statuses
    objects = sum(len(e) for _, e in jobs)
    async with db.read() as session:
        executed = await session.scalar(
            select(func.count())
            .select_from(ExecutionRecord)
            .where(ExecutionRecord.batch_id == batch_id, ExecutionRecord.status == "executed")
        )
    assert executed == objects * len(document.tasks), (executed, objects)
    insights_calls = sum(
        1 for call in world.batch_calls if any("/insights" in url for _, url, _ in call)
    )
    async with db.write() as uow:
        await uow.session.execute(
            delete(ExecutionRecord).where(ExecutionRecord.batch_id == batch_id)
        )
    world.batch_calls.clear()
    return {
        "objects": objects,
        "read_calls": insights_calls,
        "write_path_calls": stats.calls,
        "updates": world.count("campaign.update"),
        "wall": wall,
    }


async def _writes(
    args: argparse.Namespace,
    db: Database,
    box: SecretBox,
    world: GraphWorld,
    graph: GraphClient,
    sheets: SheetsClient,
) -> None:
    print(
        f"writes: {args.write_objects:,} objects per level, every one raised, "
        f"{args.accounts} accounts, {args.slots} jobs at a time (1 period: spend today)"
    )
    print(
        f"{'level':<10}{'write path':<22}{'read calls/object-period':>26}"
        f"{'calls/written object':>22}{'wall s':>9}"
    )
    for level in ("campaign", "adset"):
        setup = await _setup_writes(
            db, box, world, level, args.accounts, args.write_objects // args.accounts
        )
        for label, size in (("per object (baseline)", 1), ("batched (≤ 50 a call)", 50)):
            r = await _run_writes(size, db, box, world, graph, sheets, setup, args.slots)
            n = r["objects"]
            print(
                f"{level:<10}{label:<22}{r['read_calls'] / n:>26.4f}"
                f"{r['write_path_calls'] / n:>22.4f}{r['wall']:>9.2f}"
            )


def _tagged(document: RuleDocument, run: int) -> RuleDocument:
    """The rule with its name tag made new for this run (appending a tag already there is a
    no-op, and every object must be written)."""
    tasks = [
        msgspec.structs.replace(t, action=AppendToName(text=f"[run {run}]"))
        if isinstance(t.action, AppendToName)
        else t
        for t in document.tasks
    ]
    return msgspec.structs.replace(document, tasks=tasks)


async def _two_tasks(
    args: argparse.Namespace,
    db: Database,
    box: SecretBox,
    world: GraphWorld,
    graph: GraphClient,
    sheets: SheetsClient,
) -> None:
    """A name tag and a budget raise on the same objects: one rule with both tasks (one re-read
    and one merged write per object) beside the baseline in the same run, the same two changes
    made task by task (each task its own re-read and write, the cost before AR-42)."""
    workspace_id, jobs, document = await _setup_writes(
        db,
        box,
        world,
        "campaign",
        args.accounts,
        args.write_objects // args.accounts,
        tasks=(TAG, RAISE),
        first_account=8000,
    )
    print("two tasks on every object (tag the name, raise the budget), campaign level")
    print(f"{'write path':<34}{'HTTP calls':>12}{'calls/written object':>22}{'wall s':>9}")
    calls = wall = 0.0
    objects = 0
    for run, task in enumerate(document.tasks, start=1):
        alone = _tagged(msgspec.structs.replace(document, tasks=[task]), run)
        r = await _run_writes(
            50, db, box, world, graph, sheets, (workspace_id, jobs, alone), args.slots
        )
        calls, wall, objects = calls + r["write_path_calls"], wall + r["wall"], int(r["objects"])
    print(f"{'task by task (baseline)':<34}{calls:>12.0f}{calls / objects:>22.4f}{wall:>9.2f}")
    r = await _run_writes(
        50, db, box, world, graph, sheets, (workspace_id, jobs, _tagged(document, 9)), args.slots
    )
    merged = r["write_path_calls"]
    print(
        f"{'merged per object (AR-42)':<34}{merged:>12.0f}{merged / r['objects']:>22.4f}"
        f"{r['wall']:>9.2f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--campaigns", type=int, default=10_000)
    parser.add_argument("--accounts", type=int, default=20)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--write-objects", type=int, default=10_000)
    parser.add_argument(
        "--only",
        choices=("reads", "writes", "two-tasks"),
        default=None,
        help="run one part of the benchmark",
    )
    args = parser.parse_args()
    url, pg_name = await _fresh_database()
    await upgrade(url)
    db = Database(DatabaseSettings(url=url))
    box = SecretBox(Fernet.generate_key().decode())
    world = GraphWorld()
    server = serve_world(world)
    graph = GraphClient(server.url, "v21.0", timeout_seconds=60)
    sheets = SheetsClient("http://127.0.0.1:9")
    try:
        if args.only == "two-tasks":
            await _two_tasks(args, db, box, world, graph, sheets)
            return
        if args.only != "reads":
            await _writes(args, db, box, world, graph, sheets)
            await _two_tasks(args, db, box, world, graph, sheets)
        if args.only == "writes":
            return
        workspace_id, jobs, document = await _setup(
            db, box, world, args.accounts, args.campaigns // args.accounts
        )
        print(
            f"database: {db.dialect}; {args.campaigns:,} campaigns × {len(TASKS)} tasks (3 periods) across {args.accounts} accounts, {args.slots} jobs at a time"
        )
        results = {}
        for mode in ("per_campaign", "packed", "account"):
            results[mode] = await _run_mode(
                mode, db, box, world, graph, sheets, workspace_id, jobs, document, args.slots
            )
        base = results["per_campaign"]
        assert len({r["outcome"] for r in results.values()}) == 1, "the modes disagree"
        print(
            f"{'mode':<14}{'HTTP calls':>12}{'calls/campaign':>16}{'sub-requests/campaign':>23}{'wall s':>9}{'ms/campaign':>13}"
        )
        for mode, r in results.items():
            n = r["campaigns"]
            items = f"{r['items'] / n:.2f}" if r["items"] else "(rows)"
            print(
                f"{mode:<14}{r['calls']:>12,}{r['calls'] / n:>16.4f}{items:>23}"
                f"{r['wall']:>9.2f}{1000 * r['wall'] / n:>13.3f}"
            )
        for mode in ("packed", "account"):
            r = results[mode]
            print(
                f"{mode} vs per_campaign: {base['calls'] / r['calls']:.1f}× fewer HTTP calls, "
                f"{base['wall'] / r['wall']:.2f}× the speed"
            )
        print("identical records in every mode: yes")
    finally:
        await graph.aclose()
        await sheets.aclose()
        server.stop()
        await db.dispose()
        if pg_name:
            await _drop(os.environ["BENCH_DATABASE_URL"], pg_name)


if __name__ == "__main__":
    asyncio.run(main())
