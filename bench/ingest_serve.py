"""Ingestion against the running service: ``python -m app serve`` beside a Litestar hello world on
the same server stack (uvicorn, uvloop, httptools), loaded by the same client (wrk) in the same
run, rounds alternating.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
        .venv/bin/python bench/ingest_serve.py [--seconds 5] [--in-flight 64] [--rounds 3] \\
        [--stored N | --compare-stored N] [--profile DIR] [--app-root DIR] [--baseline DIR] \\
        [--variant 'LABEL:SETTING=VALUE,…']

It creates its own PostgreSQL database (dropped at the end), migrates, makes one workspace, then
starts two processes: ``serve`` exactly as deployed (the API with its workers applying the stored
events and its sweeps, configured by environment only) and ``uvicorn serving_app:hello``. Each
round measures the hello world, then ``POST /hooks/funnels/events`` (every request a new event
id; each answered event is checked stored afterwards, and the next measurement waits until serve
has applied every stored event). The medians are printed, with every round's p99 and the server
process's CPU time per request (for serve, including what it spent applying the events).

``--stored N`` stores N processed events in the workspace before the measurements;
``--compare-stored N`` runs the whole measurement twice, on a fresh database and on one holding N
events, and prints both (cost that stays flat with the data). ``--profile DIR`` runs ``serve``
under cProfile (one file in DIR, read with ``pstats``); ``--app-root DIR`` runs ``serve`` from
another source tree; ``--baseline DIR`` measures a second ``serve`` from DIR (a previous commit)
in the same rounds, and each ``--variant`` one more ``serve`` with some settings changed
(``'window 0.5 ms:FUNNEL_INGEST_WINDOW_MS=0.5'``): before/after in the same conditions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "bench"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import httpx  # noqa: E402
import wrk_load  # noqa: E402
from ingest_group_commit import drop_pg, fresh_pg, preload, stored, workspace  # noqa: E402
from serving_stack import KEYS, free_port  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from app.clock import SystemClock  # noqa: E402
from app.db.migrate import upgrade  # noqa: E402
from app.engines.funnels.events.models import InboundEvent  # noqa: E402
from app.settings import load_settings  # noqa: E402
from app.wiring import assemble  # noqa: E402


def environment(db_url: str, port: int) -> dict[str, str]:
    return {
        **os.environ,
        **KEYS,
        "DATABASE_URL": db_url,
        "PORT": str(port),
        "LOG_LEVEL": "WARNING",
    }


def start_serve(env: dict[str, str], root: Path, profile: Path | None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "app", "serve"]
    if profile is not None:
        # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default
        # handler that ends the process before cProfile writes its file, with this one it is a
        # SystemExit, which cProfile catches.
        script = (
            "import cProfile, runpy, signal, sys; "
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); sys.argv = ['app', 'serve']; "
            f"cProfile.run(\"runpy.run_module('app', run_name='__main__')\", {str(profile)!r})"
        )
        cmd = [sys.executable, "-c", script]
    return subprocess.Popen(cmd, cwd=root, env={**env, "PYTHONPATH": str(root)})


def start_hello(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    uvicorn = str(Path(sys.executable).parent / "uvicorn")
    cmd = [uvicorn, "serving_app:hello", "--factory", "--port", str(port)]
    cmd += ["--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning"]
    return subprocess.Popen(cmd, cwd=HERE, env={**env, "PYTHONPATH": str(HERE)})


async def started(url: str, seconds: float = 180) -> None:
    """Once ``url`` answers (``serve`` migrates nothing but checks the schema and starts its
    workers; under cProfile on a busy machine that takes a while)."""
    async with httpx.AsyncClient() as client:
        for _ in range(int(seconds * 10)):
            try:
                await client.get(url + "/health")
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()  # SIGTERM: serve's workers finish their jobs; cProfile writes its file
        try:
            proc.wait(180)
        except subprocess.TimeoutExpired:
            proc.kill()


def variants(args: argparse.Namespace) -> list[tuple[str, dict[str, str], Path]]:
    """Each ``serve`` to measure: its label, its environment overrides, its source tree."""
    served = [("ingestion (serve)", {}, args.app_root)]
    if args.baseline is not None:
        served.append(("ingestion (serve, baseline tree)", {}, args.baseline))
    for given in args.variant:
        name, _, assignments = given.partition(":")
        pairs = (a.split("=", 1) for a in assignments.split(",") if a)
        served.append((f"ingestion (serve, {name})", dict(pairs), args.app_root))
    return served


async def measure(db_url: str, label: str, args: argparse.Namespace) -> dict[str, list[Any]]:
    await upgrade(db_url)
    hello_port = free_port()
    env = environment(db_url, hello_port)
    runtime = assemble(load_settings(env), SystemClock())
    ws, token = await workspace(runtime)
    await preload(runtime, ws, args.stored)
    procs = [start_hello(env, hello_port)]
    targets = {"hello world": (f"http://127.0.0.1:{hello_port}/hello", {}, procs[0])}
    for i, (name, overrides, root) in enumerate(variants(args)):
        port = free_port()
        profile = None if args.profile is None else args.profile / f"serve-{label}-{i}.prof"
        procs.append(start_serve({**environment(db_url, port), **overrides}, root, profile))
        url = f"http://127.0.0.1:{port}/hooks/funnels/events"
        targets[name] = (url, {"X-Ingest-Token": token}, procs[-1])
    results: dict[str, list[Any]] = {name: [] for name in targets}
    try:
        for url, headers, _ in targets.values():  # warm up: connections, caches
            await started("/".join(url.split("/")[:3]))
            await wrk_load.post_events(
                url, tag=f"warm{uuid.uuid4().hex[:6]}", seconds=2, connections=16, headers=headers
            )
        await applied(runtime)
        for n in args.in_flight:
            for _ in range(args.rounds):
                for name, (url, headers, proc) in targets.items():
                    results[name].append(
                        (n, *await one(runtime, name, url, headers, proc, n, args))
                    )
    finally:
        for proc in procs:
            stop(proc)
        await runtime.aclose()
    return results


async def one(
    runtime: Any,
    name: str,
    url: str,
    headers: dict[str, str],
    proc: subprocess.Popen[bytes],
    n: int,
    args: argparse.Namespace,
) -> tuple[Any, float]:
    """One measurement: wrk's result and the server's CPU per request (for serve, with what it
    spent applying the stored events afterwards)."""
    tag = f"m{n}x{uuid.uuid4().hex[:8]}"
    cpu = cpu_seconds(proc.pid)
    r = await wrk_load.post_events(
        url, tag=tag, seconds=args.seconds, connections=n, headers=headers
    )
    loaded = cpu_seconds(proc.pid)
    if "hooks" in url:
        count = await stored(runtime, tag)
        assert r.requests <= count <= r.requests + n, (r, count)
        await applied(runtime)  # serve applies what it stored, counted with it
    used = (cpu_seconds(proc.pid) - cpu) / r.requests
    after = (cpu_seconds(proc.pid) - loaded) / r.requests
    print(
        f"  {name}: {r.rate:,.0f}/s, p99 {r.p99_ms:.0f} ms, CPU "
        f"{used * 1e6:.0f} us/request ({after * 1e6:.0f} after the load)",
        flush=True,
    )
    return r, used


async def applied(runtime: Any, seconds: float = 120) -> None:
    """Once serve has applied every stored event (its ingest job, as in service)."""
    for _ in range(int(seconds * 10)):
        async with runtime.db.read() as s:
            pending = await s.scalar(
                select(func.count())
                .select_from(InboundEvent)
                .where(InboundEvent.processed_at.is_(None))
            )
        if not pending:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{pending} events not applied after {seconds} s")


def report(label: str, results: dict[str, list[Any]]) -> None:
    print(f"\n{label}: median of the rounds, each round's p99 in brackets")
    print("| what | in flight | requests/s | p99 ms (per round) | server CPU us/request |")
    print("|---|---:|---:|---|---:|")
    medians: dict[tuple[str, int], float] = {}
    for name, rows in results.items():
        for n in sorted({n for n, _, _ in rows}):
            rounds = [(r, used) for m, r, used in rows if m == n]
            rate = statistics.median(r.rate for r, _ in rounds)
            p99 = statistics.median(r.p99_ms for r, _ in rounds)
            cpu = statistics.median(used for _, used in rounds) * 1e6
            each = ", ".join(f"{r.p99_ms:.0f}" for r, _ in rounds)
            medians[(name, n)] = rate
            print(f"| {name} | {n} | {rate:,.0f} | {p99:.1f} ({each}) | {cpu:.0f} |")
    for name, n in medians:
        if name != "hello world":
            ratio = medians[(name, n)] / medians[("hello world", n)]
            print(f"  {label}, {n} in flight: {name} / hello world {ratio:.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--in-flight", default="64")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stored", type=int, default=0)
    parser.add_argument("--compare-stored", type=int, default=0)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--app-root", type=Path, default=ROOT)
    parser.add_argument(
        "--baseline", type=Path, help="also measure serve from this source tree (a commit before)"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="also measure serve with these settings, e.g. 'window 0.5:FUNNEL_INGEST_WINDOW_MS=0.5'",
    )
    args = parser.parse_args()
    args.in_flight = [int(n) for n in args.in_flight.split(",")]
    args.app_root = args.app_root.resolve()
    args.baseline = None if args.baseline is None else args.baseline.resolve()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    if not wrk_load.available():
        raise SystemExit("wrk is needed (apt-get install wrk)")
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    sizes = [args.stored] if not args.compare_stored else [0, args.compare_stored]
    print(f"serve from {args.app_root}; PostgreSQL; wrk, {args.seconds:.0f} s per measurement")
    for size in sizes:
        args.stored = size
        db_url = await fresh_pg(base)
        try:
            report(f"{size:,} events stored", await measure(db_url, f"s{size}", args))
        finally:
            await drop_pg(db_url)


if __name__ == "__main__":
    asyncio.run(main())
