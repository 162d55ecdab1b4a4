"""Funnel mail in the running system beside campaign sending in the same system, same run.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
    BENCH_REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/system_mail.py [--contacts 10000] [--workers 2] [--profile DIR]

It creates its own PostgreSQL database (dropped at the end) and its own arq queue name on the
Redis, migrates, starts a counting SMTP server (aiosmtpd in its own process,
``bench/mail_sink.py``), then the system as it is deployed scaled out: ``python -m app serve``
and ``--workers`` × ``python -m app worker``, every process configured by environment only. In
this process it makes one workspace with ``--contacts`` contacts and a published one-mail funnel
(a ``send_email`` node, marketing mail: unsubscribe links added at send time), then:

1. **funnel mail**: every contact enters the funnel the way the trigger matcher enters contacts
   (``enter_many``, one transaction), and the runner's job is queued as the matcher queues it;
   the processes do the rest (runner → outbox → deliverer jobs → SMTP). Measured from the start
   of the entering transaction to the arrival of the last message;
2. **campaigns**: a campaign to the same workspace (the same contacts): its audience snapshot
   (``materialise``) and its sender job queued as the campaign sweep queues it. Measured from
   the start of the snapshot to the arrival of the last message.

Each phase checks that every message arrived exactly once (by Message-ID), and prints a
message's costs: the CPU the system's processes used, the CPU PostgreSQL used, the transactions
committed in the database and the Redis commands run (PostgreSQL's CPU and Redis's commands are
server-wide counts: give it a PostgreSQL and a Redis nothing else uses); the funnel phase also how
long the entering transaction took. ``--profile DIR``
runs every process under cProfile (``python -m cProfile -o``), one
file per process in DIR (read them with ``pstats``); ``--app-root DIR`` runs the processes from
another source tree (a previous commit, for a before/after in the same conditions).
``BENCH_TIMELINE=1`` prints the messages that arrived in each second of each phase.

The last line is ``funnel mail N msg/s, campaigns M msg/s, ratio R.RRx``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cryptography.fernet import Fernet  # noqa: E402
from funnels_deliver import create_database, drop_database  # noqa: E402
from mail_sink import Arrivals, Sink  # noqa: E402
from redis.asyncio import Redis  # noqa: E402
from server_cpu import postgres_cpu_seconds  # noqa: E402
from sqlalchemy import insert, select, text  # noqa: E402

from app.clock import SystemClock  # noqa: E402
from app.db.migrate import upgrade  # noqa: E402
from app.engines.funnels.campaigns.due.audience import materialise  # noqa: E402
from app.engines.funnels.campaigns.jobs import SEND, CampaignPayload  # noqa: E402
from app.engines.funnels.campaigns.service import CampaignData, create_campaign  # noqa: E402
from app.engines.funnels.definitions.service import (  # noqa: E402
    create_funnel,
    parse_definition,
    publish,
)
from app.engines.funnels.jobs import runners  # noqa: E402
from app.engines.funnels.models import Contact, FunnelVersion  # noqa: E402
from app.engines.funnels.runs.due.entry import enter_many  # noqa: E402
from app.platform import service  # noqa: E402
from app.runtime import Runtime  # noqa: E402
from app.sandbox.base import free_port  # noqa: E402
from app.settings import load_settings  # noqa: E402
from app.wiring import assemble  # noqa: E402

SUBJECT = "Hello {{first_name}}"
BODY = "Hello {{first_name}},\n\nthe news of the week: https://example.com/news\n"
FUNNEL = {
    "triggers": [],
    "nodes": [
        {"kind": "send_email", "id": "mail", "subject": SUBJECT, "body": BODY, "entry": True}
    ],
}


LOOP_LAG = ROOT / "bench" / "loop_lag"


@dataclass
class Process:
    """One ``python -m app <command>`` process, its output in a log file."""

    command: str
    env: dict[str, str]
    log_path: Path
    profile: Path | None = None
    root: Path = ROOT
    """The source tree the process runs (another checkout: its code beside this one's)."""
    loop_lag: Path | None = None
    """Where its event loop's waits are written (``bench/loop_lag``), if they are watched."""
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None

    def start(self) -> None:
        self.log = self.log_path.open("ab")
        python = [sys.executable]
        if self.profile is not None:
            python += ["-m", "cProfile", "-o", str(self.profile)]
        env = {**self.env, "PYTHONPATH": str(self.root)}
        if self.loop_lag is not None:
            env["PYTHONPATH"] += os.pathsep + str(LOOP_LAG)
            env["LOOP_LAG_FILE"] = str(self.loop_lag)
        self.proc = subprocess.Popen(
            [*python, "-m", "app", self.command],
            cwd=self.root,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: workers finish or release their jobs; cProfile writes
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.log is not None:
            self.log.close()


def _ticks(pid: int) -> int:
    """User + system CPU clock ticks of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


async def settled(procs: list[Process], timeout: float = 120) -> None:
    """Wait until every process has started: each used under 5 % of a core for a whole second
    (imports, wiring, the start-up heap's freeze and the first sweeps done), so that a phase
    measures the system at work, not its start."""
    deadline = time.monotonic() + timeout
    seen = [[_ticks(p.proc.pid) for p in procs if p.proc is not None]]
    tick = os.sysconf("SC_CLK_TCK")
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        seen = [*seen[-3:], [_ticks(p.proc.pid) for p in procs if p.proc is not None]]
        if len(seen) == 4 and all((b - a) / tick < 0.05 for a, b in zip(*seen[::3], strict=True)):
            return
    raise SystemExit(f"the processes were still busy starting after {timeout:.0f} s")


def cpu_seconds(procs: list[Process]) -> float:
    """User + system CPU the processes have used so far: less noisy than rates on a machine
    shared with other work."""
    return sum(_ticks(p.proc.pid) for p in procs if p.proc is not None) / os.sysconf("SC_CLK_TCK")


async def transactions(runtime: Runtime) -> int:
    """Transactions committed in the benchmark's database so far (autocommit statements each
    count as one)."""
    async with runtime.db.read() as session:
        return int(
            await session.scalar(
                text("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            )
            or 0
        )


@dataclass
class Costs:
    """What the system spent on a phase: its processes' CPU, PostgreSQL's CPU, transactions,
    Redis commands."""

    cpu: float
    postgres: float
    xacts: int
    redis: tuple[int, int]

    @classmethod
    async def now(cls, procs: list[Process], runtime: Runtime, redis_url: str) -> Costs:
        await asyncio.sleep(0.6)  # PostgreSQL's statistics are sent every 500 ms at most
        return cls(
            cpu_seconds(procs),
            postgres_cpu_seconds(),
            await transactions(runtime),
            await redis_commands(redis_url),
        )

    def per_message(self, before: Costs, n: int) -> str:
        commands, watches = (a - b for a, b in zip(self.redis, before.redis, strict=True))
        return (
            f"serve + workers used {(self.cpu - before.cpu) * 1000 / n:.2f} ms of CPU a message, "
            f"PostgreSQL {(self.postgres - before.postgres) * 1000 / n:.2f} ms; "
            f"{(self.xacts - before.xacts) / n:.2f} transactions and "
            f"{commands / n:.2f} Redis commands a message ({watches:,} WATCH)"
        )


def environment(db_url: str, redis_url: str, sink: Sink, tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "ARQ_QUEUE_NAME": f"bench:{uuid.uuid4().hex[:8]}",
        "ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SESSION_SECRET": uuid.uuid4().hex,
        "KEY_FILE": str(tmp / "keys.json"),
        "PUBLIC_URL": "http://sweepline.bench",
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(sink.port),
        "MAIL_FROM": "news@bench.test",
        "LOG_LEVEL": "WARNING",
    }


async def seed(runtime: Runtime, contacts: int) -> tuple[int, FunnelVersion, list[int]]:
    """A workspace, its contacts and a published one-mail funnel."""
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name="Bench", now=now)
        created = await service.create_workspace(
            uow.session, runtime.secrets, organisation_id=org.id, name="Main", now=now
        )
        ws = created.workspace.id
        funnel = await create_funnel(uow.session, ws, "one mail", parse_definition(FUNNEL), now)
        version = await publish(uow.session, ws, funnel.id, user_id=None, now=now)
    rows = [
        {
            "workspace_id": ws,
            "email": f"c{i}@bench.test",
            "first_name": f"C{i}",
            "last_name": "",
            "timezone": "UTC",
            "fields": {},
            "consent": {},
            "suppressed": {},
            "created_at": now,
            "updated_at": now,
        }
        for i in range(contacts)
    ]
    async with runtime.db.write() as uow:
        for start in range(0, len(rows), 5000):
            await uow.session.execute(insert(Contact), rows[start : start + 5000])
        ids = list(await uow.session.scalars(select(Contact.id).where(Contact.workspace_id == ws)))
    return ws, version, ids


async def arrived(sink: Sink, n: int, timeout: float) -> Arrivals:
    """Wait until ``n`` distinct messages arrived (and the count's end), then take them."""
    deadline = time.monotonic() + timeout
    seen: list[int] = []
    while (got := sink.peek()).distinct < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {got.distinct} of {n} messages arrived in {timeout:.0f} s")
        seen.append(got.distinct)
        await asyncio.sleep(1.0)
    if os.environ.get("BENCH_TIMELINE"):
        # Messages arrived in each second since the start (where the time goes).
        print("  per second:", [b - a for a, b in zip(seen, [*seen[1:], n], strict=True)])
    await asyncio.sleep(1.0)  # anything sent twice arrives too
    got = sink.take()
    assert (got.total, got.distinct) == (n, n), (got, n)
    return got


async def funnel_mail(
    runtime: Runtime, sink: Sink, version: FunnelVersion, ids: list[int], timeout: float
) -> tuple[float, float, Arrivals]:
    """(when the entering began, how long its transaction took, the arrivals)."""
    began = time.time()
    async with runtime.db.write() as uow:
        entered = await enter_many(
            uow.session, [(version, cid) for cid in ids], now=SystemClock().now()
        )
        assert entered == len(ids), (entered, len(ids))
        await runtime.queue.enqueue_many(uow, runners(runtime.settings.funnels))
    entering = time.time() - began
    return began, entering, await arrived(sink, len(ids), timeout)


async def redis_commands(url: str) -> tuple[int, int]:
    """Commands the Redis server has run so far: in all, and ``WATCH`` (a job start's
    transaction). Server-wide: on a Redis nothing else uses, the system's own."""
    client = Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return sum(s["calls"] for s in stats.values()), stats.get("cmdstat_watch", {}).get("calls", 0)


async def campaign_mail(
    runtime: Runtime, sink: Sink, ws: int, n: int, timeout: float
) -> tuple[float, Arrivals]:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        campaign = await create_campaign(
            uow.session,
            ws,
            CampaignData(name="News", subject=SUBJECT, body=BODY, rate_per_minute=100_000),
            now,
        )
        campaign_id = campaign.id
    began = time.time()
    async with runtime.db.write() as uow:
        assert await materialise(uow.session, campaign_id, runtime.clock.now()) == n
        await runtime.queue.enqueue(uow, SEND, CampaignPayload(campaign_id=campaign_id))
    return began, await arrived(sink, n, timeout)


def loop_waits(procs: list[Process], began: float, ended: float) -> str:
    """Each process's event-loop waits between ``began`` and ``ended`` (unix times)."""
    out = []
    for p in procs:
        if p.loop_lag is None or not p.loop_lag.exists():
            continue
        waits = sorted(
            float(wait)
            for at, wait in (line.split() for line in p.loop_lag.read_text().splitlines())
            if began <= float(at) <= ended
        )
        if waits:
            n = len(waits)
            out.append(
                f"{p.command} p50 {waits[n // 2]:.2f} ms, p99 {waits[n * 99 // 100]:.1f} ms, "
                f"max {waits[-1]:.1f} ms ({sum(w > 10 for w in waits)} over 10 ms)"
            )
    return "; ".join(out)


def rate(n: int, began: float, got: Arrivals) -> tuple[float, float]:
    """(messages/s from the start to the last arrival, messages/s first to last arrival)."""
    return n / (got.last_at - began), n / max(1e-9, got.last_at - got.first_at)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contacts", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--profile", type=Path, help="cProfile every process into this folder")
    parser.add_argument(
        "--app-root",
        type=Path,
        default=ROOT,
        help="run the processes from this source tree (e.g. `git archive` of a previous commit)",
    )
    parser.add_argument(
        "--loop-lag",
        action="store_true",
        help="watch each process's event loop from a thread (bench/loop_lag) and print its waits",
    )
    args = parser.parse_args()
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    tmp = Path(tempfile.mkdtemp(prefix="sweepline-system-mail-"))
    db_url = await create_database(base)
    sink = Sink()
    procs: list[Process] = []
    try:
        await upgrade(db_url)
        env = environment(db_url, redis_url, sink, tmp)
        runtime = assemble(load_settings(env), SystemClock())
        ws, version, ids = await seed(runtime, args.contacts)
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
        commands = ["serve"] + ["worker"] * args.workers
        for i, command in enumerate(commands):
            env_i = {**env, "PORT": str(free_port())} if command == "serve" else env
            profile = None if args.profile is None else args.profile / f"{i}-{command}.prof"
            log = tmp / f"{i}-{command}.log"
            lag = tmp / f"{i}-{command}.lag" if args.loop_lag else None
            procs.append(Process(command, env_i, log, profile, args.app_root.resolve(), lag))
        for p in procs:
            p.start()
        await settled(procs)
        n = len(ids)
        print(
            f"PostgreSQL + Redis, serve + {args.workers} workers, {n:,} contacts, "
            f"aiosmtpd on loopback (own process); code of {args.app_root.resolve()}; logs in {tmp}"
        )
        before = await Costs.now(procs, runtime, redis_url)
        began, entering, got = await funnel_mail(runtime, sink, version, ids, args.timeout)
        phases = [("funnel mail", began, got.last_at)]
        funnel, funnel_wire = rate(n, began, got)
        after = await Costs.now(procs, runtime, redis_url)
        print(
            f"funnel mail: {funnel:,.0f} msg/s from the first entry ({funnel_wire:,.0f} first to "
            f"last message; entering took {entering:.2f} s); {after.per_message(before, n)}"
        )
        before = after
        began, got = await campaign_mail(runtime, sink, ws, n, args.timeout)
        phases.append(("campaign", began, got.last_at))
        campaign, campaign_wire = rate(n, began, got)
        after = await Costs.now(procs, runtime, redis_url)
        print(
            f"campaign: {campaign:,.0f} msg/s from the snapshot ({campaign_wire:,.0f} first to "
            f"last message); {after.per_message(before, n)}"
        )
        await runtime.aclose()
    finally:
        for p in procs:
            p.stop()
        sink.stop()
        await drop_database(db_url)
    if args.loop_lag:
        for name, start, end in phases:
            print(f"{name}, event loop waits: {loop_waits(procs, start, end)}")
    print(
        f"funnel mail {funnel:.0f} msg/s, campaigns {campaign:.0f} msg/s, ratio {funnel / campaign:.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
