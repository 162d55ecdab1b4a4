"""The serving stack: uvicorn (uvloop + httptools, what ``python -m app serve`` runs) beside
granian (Rust HTTP server, ASGI interface, one worker), each in its own process serving the same
application, loaded by wrk from a third process — in the same run.

    .venv/bin/pip install granian      # the benchmark's own dependency, not the product's
    .venv/bin/python bench/serving_stack.py [--seconds 5] [--in-flight 16,64] [--skip-pg]

Measured per server: a Litestar hello world (the stack's ceiling) and ``POST /hooks/funnels/events``
of the real application with group commit, on SQLite and PostgreSQL. Each answered event is
checked stored.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import wrk_load  # the benchmark folder's own helper
from cryptography.fernet import Fernet
from ingest_group_commit import drop_pg, fresh_pg
from sqlalchemy import func, select

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.engines.funnels.events.models import InboundEvent
from app.platform import service
from app.settings import load_settings
from app.wiring import assemble

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# One set of keys for every process of the run: the servers must read what this process wrote.
KEYS = {
    "ENCRYPTION_KEY": Fernet.generate_key().decode(),
    "SESSION_SECRET": uuid.uuid4().hex,
    "KEY_FILE": str(Path(tempfile.gettempdir()) / f"bench-keys-{uuid.uuid4().hex}.json"),
}


def environment(db_url: str) -> dict[str, str]:
    return {
        **os.environ,
        **KEYS,
        "DATABASE_URL": db_url,
        "SWEEPERS_ENABLED": "false",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(HERE),
    }


def command(server: str, factory: str, port: int) -> list[str]:
    bin_dir = Path(sys.executable).parent
    if server == "uvicorn":
        return [
            str(bin_dir / "uvicorn"),
            f"serving_app:{factory}",
            "--factory",
            "--port",
            str(port),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--no-access-log",
            "--log-level",
            "warning",
        ]
    return [
        str(bin_dir / "granian"),
        "--interface",
        "asgi",
        "--factory",
        "--port",
        str(port),
        "--workers",
        "1",
        "--loop",
        "uvloop",
        "--no-access-log",
        "--log-level",
        "warning",
        f"serving_app:{factory}",
    ]


async def started(url: str) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(300):
            try:
                await client.get(url + "/health")
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


async def workspace_token(db_url: str) -> str:
    env = environment(db_url)
    runtime = assemble(load_settings(env), SystemClock())
    now = runtime.clock.now()
    try:
        async with runtime.db.write() as uow:
            org = await service.create_organisation(uow.session, name="Bench", now=now)
            created = await service.create_workspace(
                uow.session,
                runtime.secrets,
                organisation_id=org.id,
                name="Bench",
                timezone="UTC",
                now=now,
            )
        return created.ingest_token
    finally:
        await runtime.aclose()


async def stored(db_url: str, tag: str) -> int:
    runtime = assemble(load_settings(environment(db_url)), SystemClock())
    try:
        async with runtime.db.read() as s:
            query = select(func.count()).select_from(InboundEvent)
            return int(await s.scalar(query.where(InboundEvent.external_id.like(f"{tag}-%"))) or 0)
    finally:
        await runtime.aclose()


async def measure(db_url: str, label: str, args: argparse.Namespace) -> list[tuple[Any, ...]]:
    await upgrade(db_url)
    token = await workspace_token(db_url)
    rows: list[tuple[Any, ...]] = []
    for server in ("uvicorn", "granian"):
        for factory, path, headers in (
            ("hello", "/hello", {}),
            ("sweepline", "/hooks/funnels/events", {"X-Ingest-Token": token}),
        ):
            port = free_port()
            proc = await asyncio.create_subprocess_exec(
                *command(server, factory, port), env=environment(db_url), cwd=HERE
            )
            url = f"http://127.0.0.1:{port}"
            try:
                await started(url)
                await wrk_load.post_events(
                    url + path,
                    tag=f"warm{uuid.uuid4().hex[:6]}",
                    seconds=2,
                    connections=16,
                    headers=headers,
                )
                for n in args.in_flight:
                    tag = f"{label}{server[0]}{n}x{uuid.uuid4().hex[:6]}"
                    r = await wrk_load.post_events(
                        url + path, tag=tag, seconds=args.seconds, connections=n, headers=headers
                    )
                    if factory == "sweepline":
                        count = await stored(db_url, tag)
                        assert r.requests <= count <= r.requests + n, (server, r, count)
                    rows.append((server, factory, n, r))
            finally:
                proc.terminate()
                await proc.wait()
                time.sleep(0.5)
    return rows


def report(label: str, rows: list[tuple[Any, ...]]) -> None:
    print(f"\n{label}")
    print("| server | endpoint | in flight | requests/s | p50 ms | p99 ms |")
    print("|---|---|---:|---:|---:|---:|")
    for server, factory, n, r in rows:
        what = "hello world" if factory == "hello" else "api_event, group commit"
        print(f"| {server} | {what} | {n} | {r.rate:,.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} |")
    by = {(s, f, n): r.rate for s, f, n, r in rows}
    for n in sorted({n for _, _, n, _ in rows}):
        for f in ("hello", "sweepline"):
            print(
                f"  {f} at {n} in flight: granian / uvicorn "
                f"{by[('granian', f, n)] / by[('uvicorn', f, n)]:.2f}"
            )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--in-flight", default="16,64")
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    args.in_flight = [int(n) for n in args.in_flight.split(",")]
    if not wrk_load.available():
        raise SystemExit("wrk is needed (apt-get install wrk)")
    if not args.skip_pg:
        pg_url = await fresh_pg(args.pg)
        try:
            report("PostgreSQL", await measure(pg_url, "pg", args))
        finally:
            await drop_pg(pg_url)
    if not args.skip_sqlite:
        tmp = Path(tempfile.mkdtemp(prefix="sweepline-serving-"))
        report("SQLite", await measure(f"sqlite+aiosqlite:///{tmp / 'serving.db'}", "lite", args))


if __name__ == "__main__":
    asyncio.run(main())
