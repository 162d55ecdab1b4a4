"""Latency of API writes on SQLite while a 20,000-row contact import runs, beside the same writes
with no import and during the same import applied in one transaction, in the same run.

    python bench/bulk_import_latency.py [--rows 20000] [--writers 4] [--interval 0.1] \\
        [--baseline-seconds 20] [--skip-single]

It creates a fresh SQLite database in a temporary directory, serves the app on a loopback port
with its workers and sweeps in the same process (as ``serve`` does) and runs ``--writers`` clients
that each create a contact (``POST /api/v1/funnels/contacts``, one tag) every ``--interval``
seconds (or as soon as the previous answer came, when that is later), over real HTTP.
Three phases, one after the other, each with its own workspace:

* baseline: the writers alone for ``--baseline-seconds``;
* import: a ``--rows``-row CSV import (tags and lists on every row, one row in 1,000 refused)
  submitted, the writers running until the job is done (chunks adapt to ``BULK_CHUNK_SECONDS``);
* one transaction: the same import with the whole file in one chunk, which is what the import
  request did before it became a job.

Printed per phase: writes, their p50 / p95 / p99 / max latency, the answers that were not 2xx,
and how long the import took.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from cryptography.fernet import Fernet

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.platform import service
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.settings import BulkSettings, load_settings
from app.web.app import create_app
from app.wiring import assemble


@dataclasses.dataclass
class Phase:
    name: str
    latencies: list[float] = dataclasses.field(default_factory=list)
    statuses: Counter[int] = dataclasses.field(default_factory=Counter)
    import_seconds: float | None = None
    job: dict[str, object] | None = None

    def line(self) -> str:
        lat = sorted(self.latencies)
        if not lat:
            return f"{self.name:<16} no writes"

        def pct(p: float) -> float:
            return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000

        failed = {s: n for s, n in self.statuses.items() if not 200 <= s < 300}
        took = f"  import {self.import_seconds:.1f} s" if self.import_seconds else ""
        return (
            f"{self.name:<16} {len(lat):>6} writes  p50 {statistics.median(lat) * 1000:7.1f} ms"
            f"  p95 {pct(0.95):7.1f} ms  p99 {pct(0.99):7.1f} ms  max {lat[-1] * 1000:7.1f} ms"
            f"  not 2xx {failed or 0}{took}"
        )


def import_csv(rows: int) -> str:
    lines = ["email,first_name,last_name,timezone,tags,lists"]
    for i in range(1, rows + 1):
        email = "" if i % 1000 == 0 else f"person{i}@import.test"
        lines.append(f"{email},First{i},Last{i},Europe/Berlin,t{i % 7};all,l{i % 3}")
    return "\n".join(lines) + "\n"


async def api_key(runtime: Runtime, name: str) -> str:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name=name, now=now)
        created = await service.create_workspace(
            uow.session, runtime.secrets, organisation_id=org.id, name=name, now=now
        )
        _, key = await service.create_api_key(
            uow.session, workspace_id=created.workspace.id, name="bench", now=now
        )
    return key


INTERVAL = [0.1]
"""Seconds between one writer's writes (``--interval``)."""


async def writers(
    client: httpx.AsyncClient, key: str, phase: Phase, count: int, stop: asyncio.Event
) -> None:
    headers = {"Authorization": f"Bearer {key}"}

    async def one(w: int) -> None:
        n = 0
        next_at = time.perf_counter()
        while not stop.is_set():
            n += 1
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            started = time.perf_counter()
            next_at = started + INTERVAL[0]
            response = await client.post(
                "/api/v1/funnels/contacts",
                json={"email": f"w{w}-{n}@api.test", "tags": ["api"]},
                headers=headers,
            )
            phase.latencies.append(time.perf_counter() - started)
            phase.statuses[response.status_code] += 1

    await asyncio.gather(*(one(w) for w in range(count)))


async def run_import(
    client: httpx.AsyncClient, key: str, phase: Phase, rows: int, count: int
) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    stop = asyncio.Event()
    load = asyncio.create_task(writers(client, key, phase, count, stop))
    started = time.perf_counter()
    submitted = await client.post(
        "/api/v1/funnels/contacts/import", json={"csv": import_csv(rows)}, headers=headers
    )
    submitted.raise_for_status()
    url = submitted.json()["url"]
    while True:
        await asyncio.sleep(0.5)
        body = (await client.get(url, headers=headers)).json()
        if body["status"] in ("done", "failed", "cancelled"):
            break
    phase.import_seconds = time.perf_counter() - started
    phase.job = body
    stop.set()
    await load


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="sweepline-bench-"))
    url = f"sqlite+aiosqlite:///{folder / 'bench.db'}"
    await upgrade(url)
    settings = load_settings(
        {
            "DATABASE_URL": url,
            "ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "SESSION_SECRET": "bench-session-secret-0123456789abcdef",
            "KEY_FILE": str(folder / "keys.json"),
            "SMTP_PORT": "1",
            # The writers measure latency, not the rate limits (bench/rate_limit_overhead.py).
            "RATE_LIMIT_KEY_WRITE_BURST": "0",
            "RATE_LIMIT_WORKSPACE_WRITE_BURST": "0",
        }
    )
    runtime = assemble(settings, SystemClock())
    app = create_app(settings, runtime, background=False)
    runtime.start_workers()
    runtime.start_sweepers()
    phases = []
    try:
        async with (
            serve_in_loop(app) as base,
            httpx.AsyncClient(base_url=base, timeout=120) as client,
        ):
            baseline = Phase("baseline")
            stop = asyncio.Event()
            load = asyncio.create_task(
                writers(client, await api_key(runtime, "baseline"), baseline, args.writers, stop)
            )
            await asyncio.sleep(args.baseline_seconds)
            stop.set()
            await load
            phases.append(baseline)

            chunked = Phase("import (chunks)")
            await run_import(
                client, await api_key(runtime, "chunked"), chunked, args.rows, args.writers
            )
            phases.append(chunked)

            if not args.skip_single:
                runtime.settings = dataclasses.replace(
                    settings,
                    bulk=BulkSettings(
                        chunk_items=args.rows * 2, chunk_seconds=3600.0, max_import_rows=args.rows
                    ),
                )
                single = Phase("one transaction")
                await run_import(
                    client, await api_key(runtime, "single"), single, args.rows, args.writers
                )
                phases.append(single)
    finally:
        await runtime.aclose()
    print(
        f"SQLite, {args.rows} rows, {args.writers} writers, one POST /api/v1/funnels/contacts"
        f" every {args.interval:g} s each"
    )
    for phase in phases:
        print(phase.line())
        if phase.job:
            print(f"{'':<16} job {phase.job['status']}, counters {phase.job['counters']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--baseline-seconds", type=float, default=20.0)
    parser.add_argument("--skip-single", action="store_true")
    parsed = parser.parse_args()
    INTERVAL[0] = parsed.interval
    asyncio.run(main(parsed))
