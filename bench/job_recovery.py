"""How long a bulk job of each kind stands still after its worker process is SIGKILLed, beside the
same jobs run without a kill, in the same run.

    python bench/job_recovery.py [--items 3000] [--database-url URL] [--redis-url URL] \\
        [--lease-seconds 30]

Without ``--database-url`` it creates a fresh SQLite database in a temporary directory (the
embedded default, database queue); with ``--redis-url`` the jobs go through arq. The schema is
migrated, then for each of the four bulk kinds (contact CSV import, funnel enrolment, campaign
audience snapshot, keyword import; ``--items`` items each, chunks of 10) one job is queued in a
workspace of its own, and ``python -m app worker`` processes run them:

* no kill: one worker runs the four jobs to their end; printed per kind: how long it took;
* kill: one worker runs them until each has committed a few chunks, is SIGKILLed, and a second
  worker is started at once; printed per kind: how long after the kill the job moved again (a
  new chunk committed: the recovery), and how long after the kill it was done.

On arq the figure arq itself would give is printed beside them: it keeps a started job "in
progress" for the worker's longest job timeout plus 10 s (computed from the registered jobs:
that is arq's rule, not a measurement).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.fernet import Fernet
from sqlalchemy import insert, select

from app.db.migrate import upgrade
from app.engines.funnels.campaigns.due.audience import start_materialising
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.contacts.csv_import import start_import
from app.engines.funnels.definitions.service import create_funnel, parse_definition, publish
from app.engines.funnels.models import Contact
from app.engines.funnels.runs.due.enrolment import start_enrolment
from app.engines.ranktracking.keyword_import import start_keyword_import
from app.engines.ranktracking.lists import create_list
from app.platform import service
from app.runtime import Runtime
from app.scheduling.arq_workers import TIMEOUT_MARGIN_SECONDS
from app.scheduling.bulk_models import BULK_DONE, BulkJob
from app.settings import load_settings
from app.wiring import assemble

ROOT = Path(__file__).resolve().parents[1]
CHUNK_ITEMS = 10
KINDS = (
    "funnels.contacts_import",
    "funnels.enrolment",
    "funnels.campaign_audience",
    "ranktracking.keywords_import",
)


async def workspace(runtime: Runtime, name: str) -> int:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name=name, now=now)
        created = await service.create_workspace(
            uow.session, runtime.secrets, organisation_id=org.id, name=name, now=now
        )
    return created.workspace.id


async def contacts(runtime: Runtime, ws: int, n: int, tag: str) -> None:
    now = runtime.clock.now()
    row = {"first_name": "", "last_name": "", "timezone": "UTC", "fields": {}}
    rows = [
        {**row, "workspace_id": ws, "email": f"{tag}{i}@bench.test", "consent": {}}
        | {"suppressed": {}, "created_at": now, "updated_at": now}
        for i in range(n)
    ]
    async with runtime.db.write() as uow:
        await uow.session.execute(insert(Contact), rows)


async def start_jobs(runtime: Runtime, items: int) -> dict[str, int]:
    """One bulk job of each kind, each in a workspace of its own; their ids by kind."""
    tag = uuid.uuid4().hex[:8]
    now = runtime.clock.now()
    queue = runtime.queue
    jobs: dict[str, int] = {}
    ws = await workspace(runtime, f"import {tag}")
    async with runtime.db.write() as uow:
        text = "email\n" + "".join(f"i{n}@{tag}.test\n" for n in range(items))
        jobs[KINDS[0]] = (
            await start_import(
                uow, queue, workspace_id=ws, text=text, columns=None, max_rows=10**6, now=now
            )
        ).id
    ws = await workspace(runtime, f"enrol {tag}")
    await contacts(runtime, ws, items, f"e{tag}")
    definition = parse_definition(
        {"nodes": [{"kind": "send_email", "id": "a", "entry": True, "subject": "Hi", "body": "B"}]}
    )
    async with runtime.db.write() as uow:
        funnel = await create_funnel(uow.session, ws, "F", definition, now)
        version = await publish(uow.session, ws, funnel.id, user_id=None, now=now)
    async with runtime.db.write() as uow:
        entered = await start_enrolment(
            uow, queue, version, now=now, contact_ids=None, predicate=None, chunk_items=CHUNK_ITEMS
        )
        assert entered.job is not None
        jobs[KINDS[1]] = entered.job.id
    ws = await workspace(runtime, f"campaign {tag}")
    await contacts(runtime, ws, items, f"c{tag}")
    async with runtime.db.write() as uow:
        campaign = await create_campaign(uow.session, ws, CampaignData("C", "Hi", "News"), now)
    async with runtime.db.write() as uow:
        campaign = await start_materialising(uow, queue, campaign.id, now, chunk_items=CHUNK_ITEMS)
        assert campaign.audience_job_id is not None
        jobs[KINDS[2]] = campaign.audience_job_id
    ws = await workspace(runtime, f"keywords {tag}")
    async with runtime.db.write() as uow:
        kl, _ = await create_list(uow.session, workspace_id=ws, name="K", keywords=[], now=now)
    async with runtime.db.write() as uow:
        text = "".join(f"keyword {n}\n" for n in range(items))
        jobs[KINDS[3]] = (
            await start_keyword_import(
                uow, queue, workspace_id=ws, list_id=kl.id, text=text, fmt="text", now=now
            )
        ).id
    return jobs


async def chunks(runtime: Runtime, jobs: dict[str, int]) -> dict[str, tuple[int, bool]]:
    """Per kind: chunks committed, and whether the job is done."""
    async with runtime.db.read() as s:
        rows = (
            await s.execute(
                select(BulkJob.id, BulkJob.chunks, BulkJob.status).where(
                    BulkJob.id.in_(jobs.values())
                )
            )
        ).all()
    by_id = {row[0]: (int(row[1]), row[2] == BULK_DONE) for row in rows}
    return {kind: by_id[job_id] for kind, job_id in jobs.items()}


@dataclass
class Worker:
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "worker"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)


async def no_kill(runtime: Runtime, env: dict[str, str], items: int) -> dict[str, float]:
    jobs = await start_jobs(runtime, items)
    began = time.perf_counter()
    worker = Worker(env).start()
    took: dict[str, float] = {}
    try:
        while len(took) < len(jobs):
            for kind, (_, done) in (await chunks(runtime, jobs)).items():
                if done and kind not in took:
                    took[kind] = time.perf_counter() - began
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
    return took


async def kill(
    runtime: Runtime, env: dict[str, str], items: int
) -> tuple[dict[str, float], dict[str, float]]:
    jobs = await start_jobs(runtime, items)
    doomed = Worker(env).start()
    while not all(n >= 2 and not done for n, done in (await chunks(runtime, jobs)).values()):
        await asyncio.sleep(0.01)
    doomed.stop(signal.SIGKILL)
    killed_at = time.perf_counter()
    at_kill = await chunks(runtime, jobs)
    survivor = Worker(env).start()
    moved: dict[str, float] = {}
    done_after: dict[str, float] = {}
    try:
        while len(done_after) < len(jobs):
            now = await chunks(runtime, jobs)
            for kind, (n, done) in now.items():
                if n > at_kill[kind][0] and kind not in moved:
                    moved[kind] = time.perf_counter() - killed_at
                if done and kind not in done_after:
                    done_after[kind] = time.perf_counter() - killed_at
            await asyncio.sleep(0.05)
    finally:
        survivor.stop()
    return moved, done_after


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--lease-seconds", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sweepline-recovery-"))
    url = args.database_url or f"sqlite+aiosqlite:///{tmp / 'bench.db'}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": args.redis_url,
        "ARQ_QUEUE_NAME": f"sweepline-bench-{uuid.uuid4().hex[:8]}",
        "ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SESSION_SECRET": uuid.uuid4().hex,
        "KEY_FILE": str(tmp / "keys.json"),
        "BULK_CHUNK_ITEMS": str(CHUNK_ITEMS),
        "JOB_LEASE_SECONDS": str(args.lease_seconds),
        "LOG_LEVEL": "WARNING",
    }
    await upgrade(url)
    runtime = assemble(load_settings(env))
    mode = f"{'PostgreSQL' if 'postgresql' in url else 'SQLite'} + {runtime.queue.backend} queue"
    print(f"{mode}, {args.items} items per job, JOB_LEASE_SECONDS={args.lease_seconds}")
    try:
        baseline = await no_kill(runtime, env, args.items)
        moved, done_after = await kill(runtime, env, args.items)
    finally:
        await runtime.aclose()
    print(f"{'kind':<30} {'no kill: done':>14} {'kill: moved again':>18} {'kill: done':>11}")
    for kind in KINDS:
        print(
            f"{kind:<30} {baseline[kind]:>12.1f} s {moved[kind]:>16.1f} s"
            f" {done_after[kind]:>9.1f} s"
        )
    if runtime.queue.backend == "arq":
        longest = max(s.timeout_seconds for s in runtime.registry.specs.values())
        print(
            f"arq's own in-progress TTL for these workers (longest timeout {longest:g} s + "
            f"{TIMEOUT_MARGIN_SECONDS:g} s margin + 10 s): {longest + TIMEOUT_MARGIN_SECONDS + 10:g} s"
        )


if __name__ == "__main__":
    asyncio.run(main())
