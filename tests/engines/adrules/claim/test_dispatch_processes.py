"""AR-10 across processes: two processes sweeping the same PostgreSQL database dispatch each due
rule exactly once."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.engines.adrules.models import Batch
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.models import Job
from app.settings import Settings
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    store_token,
)

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.postgres
async def test_ar10_a_due_rule_is_dispatched_once_by_two_processes(
    runtime: Runtime, settings: Settings, database_url: str, ws: Workspace, world: GraphWorld
) -> None:
    world.add_account("act_1", "One")
    world.add_campaigns("act_1", 5)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    rules = 40
    for i in range(rules):
        await create_rule(
            runtime, workspace_id=ws.workspace_id, account_ids=[account.id], name=f"R{i}"
        )

    start_at = time.time() + 2.0
    args = [
        database_url,
        settings.integrations.meta_graph_url,
        settings.security.encryption_key,
        runtime.clock.now().isoformat(),
        str(start_at),
    ]
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.engines.adrules.claim.dispatch_process",
            *args,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs = await asyncio.gather(*(p.communicate() for p in processes))
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()
    dispatched = [json.loads(out)["rules"] for out, _ in outputs]

    assert sum(dispatched) == rules
    async with runtime.db.read() as session:
        per_rule = (
            await session.execute(select(Batch.rule_id, func.count()).group_by(Batch.rule_id))
        ).all()
        jobs = await session.scalar(select(func.count()).select_from(Job))
    assert len(per_rule) == rules
    assert {count for _, count in per_rule} == {1}
    assert jobs == rules
