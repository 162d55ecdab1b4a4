"""CPU per request of the ingestion endpoint, with the application called in process (ASGI, no
network, no HTTP parser), beside a Litestar hello world and the bare single-insert endpoint.

    .venv/bin/python bench/ingest_cpu.py [--requests 5000] [--in-flight 16] [--pg URL] \\
        [--profile out.prof] [--stub-writer]

The process's CPU time (``time.process_time``) divided by the requests answered: the application's
own cost per request, apart from the HTTP server and the load generator. The driver is a bare ASGI
call (one scope, one body message, the answer collected), so what it adds is a few microseconds.
``--profile`` writes a cProfile of the ``api_event`` run (open it with ``python -m pstats`` or
snakeviz). ``--stub-writer`` answers every event as stored without writing it: the application's
path alone. SQLite unless ``--pg`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop
from ingest_group_commit import bare_app, drop_pg, fresh_pg, settings_for, workspace

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.heap import freeze_startup_heap
from app.web.app import create_app
from app.wiring import assemble


def _body(tag: str, n: int) -> bytes:
    return (
        f'{{"event_id":"{tag}-{n}","name":"order_placed","contact":{{"email":"c{n % 500}'
        f'@example.com"}},"properties":{{"total":{n}}}}}'
    ).encode()


async def _call(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # a client that stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def run(
    app: Any, path: str, headers: list[tuple[bytes, bytes]], args: argparse.Namespace, label: str
) -> None:
    statuses: dict[int, int] = {}

    async def worker(tag: str, numbers: Iterator[int]) -> None:
        for n in numbers:
            status = await _call(app, path, headers, _body(tag, n))
            statuses[status] = statuses.get(status, 0) + 1

    async def load(requests: int) -> None:
        tag, numbers = uuid.uuid4().hex[:8], iter(range(requests))
        await asyncio.gather(*(worker(tag, numbers) for _ in range(args.in_flight)))

    # Warm first (statement caches, prepared statements, the token cache, pool connections): the
    # figure is the steady state, not the first requests' one-off costs.
    await load(max(args.requests // 5, args.in_flight))
    statuses.clear()
    profile = cProfile.Profile() if args.profile and label == "api_event" else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profile:
        profile.enable()
    await load(args.requests)
    if profile:
        profile.disable()
        profile.dump_stats(args.profile)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(
        f"  {label:<36} {cpu / args.requests * 1e6:7.0f} us CPU/request  "
        f"{args.requests / wall:8,.0f} requests/s  statuses {statuses}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--pg", default=None, help="a PostgreSQL URL (a fresh database is made)")
    parser.add_argument("--profile", default=None, help="write a cProfile of api_event here")
    parser.add_argument(
        "--stub-writer",
        action="store_true",
        help="answer without storing: the application's path alone",
    )
    args = parser.parse_args()
    if args.pg:
        db_url = await fresh_pg(args.pg)
    else:
        db_url = f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'cpu.db'}"
    await upgrade(db_url)
    runtime = assemble(settings_for(db_url, 2.0), SystemClock())
    ws, token = await workspace(runtime)
    app = create_app(runtime.settings, runtime, background=False)
    if args.stub_writer:
        from app.engines.funnels.deps import FunnelsDeps

        ids = iter(range(1, 10**9))

        async def stored(**_: Any) -> int:
            return next(ids)

        runtime.resources.require(FunnelsDeps).event_writer.store = stored  # type: ignore[method-assign]
    freeze_startup_heap()  # what `serve` does once it has started
    plain = bare_app(runtime, ws)
    auth = [(b"x-ingest-token", token.encode())]
    print(f"{'PostgreSQL' if args.pg else 'SQLite'}, {args.in_flight} in flight, in process")
    try:
        await run(plain, "/hello", [], args, "hello world (POST, no database)")
        await run(plain, "/bare", [], args, "bare endpoint (1 insert + commit)")
        await run(app, "/hooks/funnels/events", auth, args, "api_event")
    finally:
        await runtime.aclose()
        if args.pg:
            await drop_pg(db_url)


if __name__ == "__main__":
    uvloop.run(main())
