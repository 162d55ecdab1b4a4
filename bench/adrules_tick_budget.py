"""Ad rules dispatch tick while Graph calls hang.

N ad accounts (0, 40, 200) whose campaign-list calls hang on the Graph API simulator (loopback,
held open for 10 minutes), in rules of ten, all due before one healthy account's rule: the wall
time of the 10-second dispatch tick, when the healthy account's batch was queued, and what became
of the hanging accounts (skipped at their own 8-s deadline, or deferred by the tick's budget); for
200, also the next tick (the deferred accounts first). Baseline in the same run: the same ticks
with no tick budget and calls that keep their slot until their deadline (the behaviour before the
budget: an account's deadline began only once it had one of the 16 slots).

Run: ``.venv/bin/python bench/adrules_tick_budget.py`` (SQLite in a temporary file per case; the
baseline's 200-account case alone takes about 100 s).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.fernet import Fernet
from sqlalchemy import insert, select, text

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.db.session import Database
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.claim.pool import FETCH_OUTSTANDING
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import AdAccount, Batch, Rule, RuleAccount, Task
from app.engines.adrules.work.sheets_values import SheetCache
from app.integrations.meta.client import GraphClient
from app.platform import service
from app.platform.crypto import SecretBox
from app.sandbox.meta import GraphWorld, serve_world
from app.scheduling.queue import DatabaseQueue
from app.settings import DatabaseSettings
from bench.adrules_dispatch import JOB, SCHEDULE, TASK, TOKEN, UNUSED_SHEETS, fresh_database

PER_RULE = 10
HEALTHY = "act_99999"


@dataclass
class Tick:
    seconds: float
    healthy_at: float | None
    """None: not queued by this tick (or queued by an earlier one)."""
    statuses: dict[str, int]
    resumed: int


async def _seed(db: Database, box: SecretBox, world: GraphWorld, hanging: int) -> None:
    now = datetime.now(UTC)
    async with db.write() as uow:
        org = await service.create_organisation(uow.session, name="Bench", now=now)
        ws = (
            await service.create_workspace(
                uow.session, box, organisation_id=org.id, name="Bench", now=now
            )
        ).workspace
        await service.set_secret(
            uow.session, box, workspace_id=ws.id, name="meta_access_token", value=TOKEN, now=now
        )
        metas = [f"act_{10_000 + i}" for i in range(hanging)] + [HEALTHY]
        for meta in metas:
            world.add_account(meta, meta)
            world.add_campaigns(meta, 3)
            world.grant(TOKEN, meta)
        world.hang_accounts(*metas[:-1], seconds=600)
        ids = (
            await uow.session.execute(
                insert(AdAccount).returning(AdAccount.id),
                [
                    {
                        "workspace_id": ws.id,
                        "meta_id": m,
                        "name": m,
                        "currency": "EUR",
                        "timezone_name": "UTC",
                        "account_status": 1,
                        "active": True,
                        "discovered_at": now,
                    }
                    for m in metas
                ],
            )
        ).scalars()
        account_ids = list(ids)
        groups = [account_ids[i : i + PER_RULE] for i in range(0, hanging, PER_RULE)]
        groups.append([account_ids[-1]])  # the healthy account's rule, due last
        for n, group in enumerate(groups):
            due = datetime.fromtimestamp(now.timestamp() - 600 + n, UTC)
            rule_id = (
                await uow.session.execute(
                    insert(Rule).returning(Rule.id),
                    [
                        {
                            "workspace_id": ws.id,
                            "name": f"Rule {n}",
                            "status": "active",
                            "prefilters": {
                                "campaign_ids": [],
                                "name_contains": None,
                                "effective_status": None,
                            },
                            "schedule": SCHEDULE,
                            "next_execution_at": due,
                            "created_at": now,
                            "updated_at": now,
                        }
                    ],
                )
            ).scalar_one()
            await uow.session.execute(
                insert(RuleAccount), [{"rule_id": rule_id, "ad_account_id": a} for a in group]
            )
            await uow.session.execute(
                insert(Task),
                [
                    {
                        "rule_id": rule_id,
                        "workspace_id": ws.id,
                        "position": 0,
                        "name": "",
                        "document": TASK,
                        "created_at": now,
                        "updated_at": now,
                    }
                ],
            )


async def _tick(deps: AdRulesDeps, db: Database, *, watch_healthy: bool = True) -> Tick:
    clock = deps.clock
    started = time.perf_counter()
    healthy_at: float | None = None

    async def watch() -> None:
        nonlocal healthy_at
        while healthy_at is None:
            async with db.read() as session:
                status = (
                    await session.execute(
                        select(Batch.status).where(Batch.account_meta_id == HEALTHY)
                    )
                ).scalar_one_or_none()
            if status == "queued":
                healthy_at = time.perf_counter() - started
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch() if watch_healthy else asyncio.sleep(0))
    summary = await dispatch_due(deps, clock.now(), clock.now)
    seconds = time.perf_counter() - started
    await asyncio.sleep(0.1)
    watcher.cancel()
    async with db.read() as session:
        rows = (
            await session.execute(
                text("SELECT status, count(*) FROM adrules_batches GROUP BY status")
            )
        ).all()
    return Tick(seconds, healthy_at, {s: n for s, n in rows}, summary.resumed_accounts)


async def _case(hanging: int, *, budget: bool) -> list[Tick]:
    url, _ = await fresh_database()
    await upgrade(url)
    db = Database(DatabaseSettings(url=url))
    box = SecretBox(Fernet.generate_key().decode())
    world = GraphWorld()
    server = serve_world(world)
    graph = GraphClient(server.url, "v21.0", max_connections=FETCH_OUTSTANDING + 64)
    clock = SystemClock()
    try:
        await _seed(db, box, world, hanging)
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
        if not budget:
            deps = dataclasses.replace(deps, tick_budget_seconds=None, fetch_slot_seconds=1e9)
        ticks = [await _tick(deps, db)]
        if budget and hanging >= 200:
            ticks.append(await _tick(deps, db, watch_healthy=False))
        return ticks
    finally:
        await graph.aclose()
        server.stop()
        await db.dispose()


def _line(label: str, tick: Tick) -> str:
    healthy = "-" if tick.healthy_at is None else f"queued at {tick.healthy_at:5.2f} s"
    states = ", ".join(f"{n} {s}" for s, n in sorted(tick.statuses.items()))
    resumed = f", {tick.resumed} deferred taken first" if tick.resumed else ""
    return f"  {label:<34} tick {tick.seconds:6.2f} s; healthy account {healthy}; {states}{resumed}"


async def main() -> None:
    logging.disable(logging.WARNING)  # one line per skipped account otherwise
    print("dispatch tick, N hanging ad accounts + 1 healthy (SQLite, simulator on loopback)")
    deps_budget = AdRulesDeps.__dataclass_fields__["tick_budget_seconds"].default
    for hanging in (0, 40, 200):
        print(f"{hanging} hanging:")
        before = await _case(hanging, budget=False)
        print(_line("baseline (no budget, slot held)", before[0]))
        after = await _case(hanging, budget=True)
        for n, tick in enumerate(after, 1):
            print(_line(f"budget {deps_budget:g} s, slot 0.5 s, tick {n}", tick))


if __name__ == "__main__":
    asyncio.run(main())
