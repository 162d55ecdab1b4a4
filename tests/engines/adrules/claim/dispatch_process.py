"""A separate process that sweeps ad rules against a shared database (the two-process test).

Usage: ``python -m tests.engines.adrules.claim.dispatch_process DB_URL GRAPH_URL ENCRYPTION_KEY NOW_ISO START_AT``.
Waits until the wall-clock ``START_AT`` (so both processes start together), runs three sweeps at
once at ``NOW_ISO``, and prints the number of rules it dispatched as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import datetime

from app.clock import ManualClock
from app.db.session import Database
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.work.sheets_values import SheetCache
from app.integrations.meta.client import GraphClient
from app.integrations.sheets import SheetsClient
from app.platform.crypto import SecretBox
from app.scheduling.jobs import JobContext, JobSpec
from app.scheduling.queue import DatabaseQueue
from app.settings import DatabaseSettings


async def _unused(ctx: JobContext, payload: RunAccountPayload) -> None:
    raise AssertionError("this process only dispatches")


async def main(db_url: str, graph_url: str, key: str, now_iso: str, start_at: float) -> int:
    now = datetime.fromisoformat(now_iso)
    clock = ManualClock(now)
    db = Database(DatabaseSettings(url=db_url))
    graph = GraphClient(graph_url, "v21.0")
    sheets = SheetsClient("http://127.0.0.1:9")  # never called: this process only dispatches
    deps = AdRulesDeps(
        db=db,
        queue=DatabaseQueue(db, clock),
        clock=clock,
        secrets=SecretBox(key),
        graph=graph,
        sheets=sheets,
        sheet_cache=SheetCache(),
        job=JobSpec(RUN_ACCOUNT_JOB, RunAccountPayload, _unused),
        sleep=clock.sleep,
        claim_batch=7,
    )
    # Open connections before the start line, so the race is about claiming, not connecting.
    await db.ping()
    # A start line in wall-clock time: the racing processes share no loop to signal on.
    await asyncio.sleep(max(0.0, start_at - time.time()))
    try:
        summaries = await asyncio.gather(*(dispatch_due(deps, now, clock.now) for _ in range(3)))
    finally:
        await graph.aclose()
        await sheets.aclose()
        await db.dispose()
    return sum(s.rules for s in summaries)


if __name__ == "__main__":
    db_url, graph_url, key, now_iso, start_at = sys.argv[1:6]
    rules = asyncio.run(main(db_url, graph_url, key, now_iso, float(start_at)))
    print(json.dumps({"rules": rules}))
