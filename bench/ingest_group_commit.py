"""Event ingestion with group commit (``POST /hooks/funnels/events``) beside one insert and one
commit per request, on PostgreSQL and SQLite, at several requests in flight, in the same run.

    .venv/bin/python bench/ingest_group_commit.py [--events 3000] [--in-flight 4,16,64] \\
        [--pg URL] [--skip-sqlite] [--rounds 3] [--stored N | --compare-stored N | --serving] \\
        [--inline-checkpoints]

For each database and each number of requests in flight, measured one after the other, in
``--rounds`` rounds whose order alternates (the medians are printed, with each round's p99 and the
most steal time — CPU the hypervisor gave to others, ``bench/cpu_steal.py`` — any round saw):

* a Litestar hello-world endpoint (the serving stack's ceiling here);
* a bare endpoint that stores the event with one ``INSERT … ON CONFLICT DO NOTHING`` and one
  commit per request, through the same database layer, no authentication or validation;
* the application's endpoint with ``FUNNEL_INGEST_WINDOW_MS=0``: one transaction per request;
* the application's endpoint with group commit (``FUNNEL_INGEST_WINDOW_MS``, default 2 ms).

The servers are uvicorn (httptools) on uvloop in this process; the load comes from a separate
process, so the client never shares the server's event loop: wrk for ``--seconds`` per measurement
when it is installed (``bench/wrk_load.py``), else ``bench/http_load.py`` (an httpx client, which
itself tops out near 2,000 requests/s on one core; ``--httpx`` forces it). Every event is checked
stored afterwards. Each measurement starts once every server has answered what the previous one
left in flight and the machine is quiet (``cpu_steal.quiet``); a PostgreSQL database is dropped
with a checkpoint, so that its buffers are not written out while SQLite is measured.

Two modes measure the group-commit endpoint alone on two databases side by side, in alternating
order: ``--compare-stored N``, a fresh table beside one holding N events (cost that stays flat);
``--serving``, the endpoint alone beside the endpoint as ``serve`` runs it, with the queue's
workers (the job that applies stored events among them) and the sweeps in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Run as a plain script from any directory: make the repository's `app` package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
import uvloop
from cryptography.fernet import Fernet
from litestar import Litestar, Request, get, post
from sqlalchemy import event, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.engines.funnels.events.ingest import store
from app.engines.funnels.events.ingest_writer import EventWriter
from app.engines.funnels.events.models import InboundEvent
from app.heap import freeze_startup_heap
from app.platform import service
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.settings import load_settings
from app.web.app import create_app
from app.wiring import assemble

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wrk_load
from cpu_steal import CpuTimes, quiet, steal_percent

LOAD = Path(__file__).resolve().parent / "http_load.py"


async def load(
    url: str, events: int, in_flight: int, tag: str, headers: dict[str, str]
) -> dict[str, Any]:
    cmd = [sys.executable, str(LOAD), url, "--events", str(events), "--in-flight", str(in_flight)]
    cmd += ["--tag", tag]
    for name, value in headers.items():
        cmd += ["--header", f"{name}: {value}"]
    began = CpuTimes.now()
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE)
    out = (await proc.communicate())[0].decode()
    steal = steal_percent(began, CpuTimes.now())
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"{tag}: the load generator failed")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["steal"] = steal
    if result["failures"]:
        raise RuntimeError(f"{tag}: {result['failures']} failed, e.g. {result['first_failure']}")
    return result


async def load_wrk(
    url: str, seconds: float, in_flight: int, tag: str, headers: dict[str, str]
) -> dict[str, Any]:
    r = await wrk_load.post_events(
        url, tag=tag, seconds=seconds, connections=in_flight, headers=headers
    )
    return {
        "rate": r.rate,
        "p50": r.p50_ms,
        "p99": r.p99_ms,
        "requests": r.requests,
        "steal": r.steal_pct,
    }


def settings_for(db_url: str, window_ms: float, *, sweepers: bool = False) -> Any:
    return load_settings(
        {
            "DATABASE_URL": db_url,
            "ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "SESSION_SECRET": uuid.uuid4().hex,
            "KEY_FILE": str(Path(tempfile.gettempdir()) / f"bench-keys-{uuid.uuid4().hex}.json"),
            "SWEEPERS_ENABLED": str(sweepers).lower(),
            "LOG_LEVEL": "WARNING",
            "FUNNEL_INGEST_WINDOW_MS": str(window_ms),
            # The writer's other settings from the environment (FUNNEL_INGEST_BATCH_ROWS, …).
            **{k: v for k, v in os.environ.items() if k.startswith("FUNNEL_INGEST_")},
        }
    )


async def workspace(runtime: Runtime) -> tuple[int, str]:
    now = runtime.clock.now()
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
    return created.workspace.id, created.ingest_token


async def preload(runtime: Runtime, workspace_id: int, rows: int) -> None:
    """``rows`` events already stored and processed, as a busy workspace has after a while: the
    dedup index and the table are that large when the measured requests arrive."""
    if rows <= 0:
        return
    series = (
        "SELECT generate_series(1, :rows) AS n"
        if runtime.db.is_postgres
        else "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < :rows) "
        "SELECT n FROM s"
    )
    async with runtime.db.write() as uow:
        await uow.session.execute(
            text(
                "INSERT INTO funnel_inbound_events (workspace_id, source, name, external_id, "
                "payload, received_at, processed_at, outcome) "
                f"SELECT :ws, 'api', 'order_placed', 'preload-' || n, "
                '\'{"contact": {"email": "p@example.com"}, "properties": {}}\', '
                f"{'now()' if runtime.db.is_postgres else 'CURRENT_TIMESTAMP'}, "
                f"{'now()' if runtime.db.is_postgres else 'CURRENT_TIMESTAMP'}, 'recorded' "
                f"FROM ({series}) AS series"
            ),
            {"ws": workspace_id, "rows": rows},
        )
    # What the bulk insert left to do is done before the measured requests, not during them:
    # PostgreSQL's statistics and checkpoint, SQLite's checkpoint of a WAL file of ~1 GB.
    async with runtime.db.write_engine.connect() as conn:
        if runtime.db.is_postgres:
            await conn.execute(text("ANALYZE funnel_inbound_events"))
            await conn.execute(text("CHECKPOINT"))
        else:  # outside a transaction (the write engine's would hold the lock it needs)
            driver = (await conn.get_raw_connection()).driver_connection
            await driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def plans(runtime: Runtime, workspace_id: int) -> list[str]:
    """The plans of the two statements whose cost could grow with the table: the dedup lookup the
    insert's ON CONFLICT makes, and the matcher's claim of unprocessed events."""
    explain = "EXPLAIN" if runtime.db.is_postgres else "EXPLAIN QUERY PLAN"
    statements = {
        "dedup lookup": "SELECT id FROM funnel_inbound_events WHERE workspace_id = :ws AND "
        "source = 'api' AND external_id = 'preload-7' AND external_id IS NOT NULL",
        "unprocessed claim": "SELECT id FROM funnel_inbound_events WHERE processed_at IS NULL "
        "ORDER BY id LIMIT 500",
    }
    if runtime.db.is_postgres:
        # The writer's own statement (EXPLAIN does not run it): its ON CONFLICT arbiter is the
        # unique index, one probe per row whatever the table holds.
        statements["batch insert"] = (
            "INSERT INTO funnel_inbound_events (workspace_id, source, name, external_id, "
            "payload, received_at) SELECT * FROM unnest(ARRAY[:ws]::bigint[], "
            "ARRAY['api']::varchar[], ARRAY['x']::varchar[], ARRAY['preload-7']::varchar[], "
            "ARRAY['{}']::jsonb[], ARRAY[now()]::timestamptz[]) ON CONFLICT DO NOTHING "
            "RETURNING id"
        )
    lines = []
    async with runtime.db.read() as s:
        for label, sql in statements.items():
            rows = (await s.execute(text(f"{explain} {sql}"), {"ws": workspace_id})).all()
            plan = " / ".join(str(r[-1]).strip() for r in rows)
            lines.append(f"  plan, {label}: {plan}")
    return lines


async def stored(runtime: Runtime, prefix: str) -> int:
    async with runtime.db.read() as s:
        return int(
            await s.scalar(
                select(func.count())
                .select_from(InboundEvent)
                .where(InboundEvent.external_id.like(f"{prefix}-%"))
            )
            or 0
        )


class Event(msgspec.Struct):
    event_id: str
    name: str
    contact: dict[str, Any]
    properties: dict[str, Any]


class Answering:
    """An ASGI app wrapped to count the requests it is still answering. wrk stops with up to one
    request per connection unanswered, and a slow endpoint (one transaction per request, each
    waiting for SQLite's lock) takes a while to answer them: a measurement starts only once the
    previous one's server is idle, so its backlog does not land in the next one's latencies."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.in_flight = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def idle(self) -> None:
        while self.in_flight:
            await asyncio.sleep(0.01)


def bare_app(runtime: Runtime, ws: int) -> Litestar:
    """The baselines: a hello world (GET and POST) and ``/bare``, one insert and one commit per
    request through the same database layer, no authentication or validation."""

    @get("/hello", sync_to_thread=False)
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    @post("/bare", status_code=202)
    async def bare(request: Request[Any, Any, Any]) -> dict[str, Any]:
        event = msgspec.json.decode(await request.body(), type=Event)
        async with runtime.db.write() as uow:
            row_id = await store(
                uow.session,
                workspace_id=ws,
                source="bare",
                name=event.name,
                external_id=event.event_id,
                payload={"contact": event.contact, "properties": event.properties},
                now=datetime.now(UTC),
            )
        return {"stored": row_id is not None, "id": row_id}

    @post("/hello", status_code=202, sync_to_thread=False)
    def hello_post() -> dict[str, str]:
        return {"hello": "world"}

    return Litestar(route_handlers=[hello, hello_post, bare], logging_config=None)


async def measure(
    db_url: str, label: str, args: argparse.Namespace
) -> list[tuple[str, int, dict[str, Any]]]:
    await upgrade(db_url)
    grouped = assemble(settings_for(db_url, args.window_ms), SystemClock())
    single = assemble(settings_for(db_url, 0), SystemClock(), db=grouped.db)
    upkeep(grouped, args)
    ws, token = await workspace(grouped)
    began = time.perf_counter()
    await preload(grouped, ws, args.stored)
    if args.stored:
        print(
            f"{label}: {args.stored:,} events stored beforehand in {time.perf_counter() - began:.0f} s"
        )
    for line in await plans(grouped, ws):
        print(f"{label}{line}")

    apps = [
        Answering(bare_app(grouped, ws)),
        Answering(create_app(grouped.settings, single, background=False)),
        Answering(create_app(grouped.settings, grouped, background=False)),
    ]
    results: list[tuple[str, int, dict[str, Any]]] = []
    path = "/hooks/funnels/events"
    auth = {"X-Ingest-Token": token}
    try:
        async with (
            serve_in_loop(apps[0]) as plain_url,
            serve_in_loop(apps[1]) as single_url,
            serve_in_loop(apps[2]) as group_url,
        ):
            await load(plain_url + "/bare", 300, 8, f"{label}-warm-bare", {})
            await load(single_url + path, 300, 8, f"{label}-warm-single", auth)
            await load(group_url + path, 300, 8, f"{label}-warm-group", auth)
            if not args.no_freeze:
                freeze_startup_heap()  # what `serve` does once it has started
            endpoints = (
                ("hello world (POST, no database)", plain_url + "/hello", {}),
                ("bare endpoint, 1 insert + commit per request", plain_url + "/bare", {}),
                ("api_event, 1 transaction per request", single_url + path, auth),
                ("api_event, group commit", group_url + path, auth),
            )
            for round_ in range(args.rounds):
                # Alternate the order, so that no endpoint always follows the same load.
                order = endpoints if round_ % 2 == 0 else endpoints[::-1]
                for n in args.in_flight:
                    for name, url, headers in order:
                        result = await measure_endpoint(apps, grouped, url, n, label, headers, args)
                        results.append((name, n, result))
    finally:
        await single.stop()
        await single.resources.aclose()
        await grouped.aclose()
    return results


async def measure_endpoint(
    apps: list[Answering],
    runtime: Runtime,
    url: str,
    n: int,
    label: str,
    headers: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One measurement of one endpoint, once every server is idle; checks every answer stored."""
    tag = f"{label}-{n}-{uuid.uuid4().hex[:6]}"
    for app in apps:
        await app.idle()
    await quiet()
    cpu = time.process_time()
    if args.wrk:
        result = await load_wrk(url, args.seconds, n, tag, headers)
    else:
        result = await load(url, args.events, n, tag, headers)
    # The server process's CPU (HTTP server, app, SQLite's thread) per answer; the load generator
    # and PostgreSQL are other processes.
    answers = result.get("requests", args.events)
    result["cpu_us"] = (time.process_time() - cpu) / max(answers, 1) * 1e6
    if not url.endswith("/hello"):
        # Every answered event is stored; wrk may stop with up to one request per connection
        # sent but unanswered, which may be stored too.
        for app in apps:
            await app.idle()
        count = await stored(runtime, tag)
        assert answers <= count <= answers + n, (url, answers, count)
    return result


def upkeep(runtime: Runtime, args: argparse.Namespace) -> None:
    """What `serve` does: SQLite's log checkpointed in the background. ``--inline-checkpoints``
    puts back SQLite's default instead (a commit checkpoints once the log holds 1,000 pages)."""
    if not args.inline_checkpoints:
        runtime.start_database_upkeep()
        return

    def sqlite_default(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA wal_autocheckpoint=1000")
        cursor.close()

    for engine in runtime.db.engines:
        event.listen(engine.sync_engine, "connect", sqlite_default)


async def measure_stored(urls: dict[str, str], label: str, args: argparse.Namespace) -> None:
    """Cost that stays flat: the group-commit endpoint on a fresh table beside one that holds
    ``--compare-stored`` events. Prints the plans."""
    sides = {side: await open_side(url, args) for side, url in urls.items()}
    began = time.perf_counter()
    await preload(sides["stored"].runtime, sides["stored"].workspace_id, args.compare_stored)
    took = time.perf_counter() - began
    print(f"{label}: {args.compare_stored:,} events stored in {took:.0f} s")
    for side, opened in sides.items():
        for line in await plans(opened.runtime, opened.workspace_id):
            print(f"{label} ({side}){line}")
    try:
        await compare_sides(
            sides, label, f"a fresh table beside {args.compare_stored:,} stored", args
        )
    finally:
        for opened in sides.values():
            await opened.runtime.aclose()


async def measure_serving(urls: dict[str, str], label: str, args: argparse.Namespace) -> None:
    """The group-commit endpoint alone beside the same endpoint as ``serve`` runs it: the queue's
    workers (among their jobs, the one that applies the stored events) and the sweeps in the
    same process, writing to the same database."""
    sides = {
        "alone": await open_side(urls["alone"], args),
        "serving": await open_side(urls["serving"], args, background=True),
    }
    try:
        # The serving side's workers stop with its server, at the end of the comparison.
        await compare_sides(sides, label, "alone beside with the workers and sweeps", args)
        async with sides["serving"].runtime.db.read() as session:
            total = await session.scalar(select(func.count()).select_from(InboundEvent))
            applied = await session.scalar(
                select(func.count())
                .select_from(InboundEvent)
                .where(InboundEvent.processed_at.is_not(None))
            )
        print(f"  events the processing job applied meanwhile: {applied:,} of {total:,} stored")
    finally:
        for opened in sides.values():
            await opened.runtime.aclose()


@dataclass
class Side:
    """One database, its runtime and the application serving it, measured beside another."""

    runtime: Runtime
    workspace_id: int
    token: str
    app: Answering
    background: bool

    async def settle(self) -> None:
        """Wait until it has answered every request and, when its workers run, applied every
        stored event: a backlog still being applied would take the CPU from the other side's
        measurement."""
        await self.app.idle()
        while self.background:
            async with self.runtime.db.read() as session:
                waiting = await session.scalar(
                    select(func.count())
                    .select_from(InboundEvent)
                    .where(InboundEvent.processed_at.is_(None))
                )
            if not waiting:
                return
            await asyncio.sleep(0.1)


async def open_side(url: str, args: argparse.Namespace, *, background: bool = False) -> Side:
    """``background``: the application starts the queue's workers and the sweeps, as ``serve``
    does; else the database's upkeep only."""
    await upgrade(url)
    settings = settings_for(url, args.window_ms, sweepers=background)
    runtime = assemble(settings, SystemClock())
    if not background:
        upkeep(runtime, args)
    ws, token = await workspace(runtime)
    app = Answering(create_app(settings, runtime, background=background))
    return Side(runtime, ws, token, app, background)


async def measure_side(
    sides: dict[str, Side], name: str, url: str, n: int, label: str, args: argparse.Namespace
) -> dict[str, Any]:
    """One measurement of one side, once every server is idle; checks every answer stored."""
    side = sides[name]
    auth = {"X-Ingest-Token": side.token}
    tag = f"{label}-{name}-{n}-{uuid.uuid4().hex[:6]}"
    for other in sides.values():
        await other.settle()
    if args.wrk:
        result = await load_wrk(url, args.seconds, n, tag, auth)
    else:
        result = await load(url, args.events, n, tag, auth)
    await side.app.idle()
    count = await stored(side.runtime, tag)
    answered = result.get("requests", args.events)
    assert answered <= count <= answered + n, (answered, count)
    return result


async def compare_sides(
    sides: dict[str, Side], label: str, title: str, args: argparse.Namespace
) -> None:
    """The two sides served from this process and measured in turn at each load — the first
    then the second, then the second then the first, ``--rounds`` times — so that neither side
    has the run's first minutes (or its last) to itself. Prints their medians."""
    path = "/hooks/funnels/events"
    names = list(sides)
    rates: dict[tuple[str, int], list[dict[str, Any]]] = {}
    async with (
        serve_in_loop(sides[names[0]].app) as first,
        serve_in_loop(sides[names[1]].app) as second,
    ):
        served = {names[0]: first, names[1]: second}
        for name, side in sides.items():
            auth = {"X-Ingest-Token": side.token}
            await load(served[name] + path, 300, 8, f"{label}-warm-{name}", auth)
        if not args.no_freeze:
            freeze_startup_heap()
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else names[::-1]
            for n in args.in_flight:
                for name in order:
                    rates.setdefault((name, n), []).append(
                        await measure_side(sides, name, served[name] + path, n, label, args)
                    )
    a, b = names
    print(
        f"\n{label}: api_event with group commit, {title}, {args.rounds} rounds in alternating "
        "order (medians)"
    )
    print(
        f"| in flight | {a} events/s (p99 ms) | {b} events/s (p99 ms) | ratio | per round |"
        " steal %, most |"
    )
    print(
        "|----------:|------------------------:|-------------------------:|------:|----------:|"
        "--------------:|"
    )
    for n in args.in_flight:
        rate = {name: statistics.median(r["rate"] for r in rates[(name, n)]) for name in names}
        p99 = {name: statistics.median(r["p99"] for r in rates[(name, n)]) for name in names}
        rounds = ", ".join(
            f"{y['rate'] / x['rate']:.2f}"
            for x, y in zip(rates[(a, n)], rates[(b, n)], strict=True)
        )
        steals = [r["steal"] for name in names for r in rates[(name, n)] if r["steal"] is not None]
        most = f"{max(steals):.1f}" if steals else "-"
        print(
            f"| {n:>9} | {rate[a]:>10,.0f} ({p99[a]:.1f}) | {rate[b]:>10,.0f} ({p99[b]:.1f}) | "
            f"{rate[b] / rate[a]:.2f} | {rounds} | {most} |"
        )


async def writer_only(db_url: str, label: str, args: argparse.Namespace) -> None:
    """The writer alone, without HTTP: ``--events`` stores from N concurrent callers, one
    transaction each (window 0) beside group commit, alternating, in this process."""
    await upgrade(db_url)
    runtime = assemble(settings_for(db_url, 0), SystemClock())
    ws, _ = await workspace(runtime)
    print(f"\n{label}, the writer alone ({args.events} events, median of 3)")
    try:
        for n in args.in_flight:
            rates: dict[float, list[float]] = {0: [], args.window_ms: []}
            for _ in range(3):
                for window in rates:
                    writer = EventWriter(runtime.db, window_seconds=window / 1000, max_rows=500)
                    tag = uuid.uuid4().hex[:8]
                    items = iter(range(args.events))

                    async def caller(
                        writer: EventWriter = writer, tag: str = tag, items: Any = items
                    ) -> None:
                        for i in items:
                            await writer.store(
                                workspace_id=ws,
                                source="api",
                                name="order_placed",
                                external_id=f"{tag}-{i}",
                                payload={"contact": {"email": f"c{i % 500}@example.com"}},
                                now=datetime.now(UTC),
                            )

                    began = time.perf_counter()
                    await asyncio.gather(*(caller() for _ in range(n)))
                    rates[window].append(args.events / (time.perf_counter() - began))
                    await writer.aclose()
            single = statistics.median(rates[0])
            grouped = statistics.median(rates[args.window_ms])
            print(
                f"  {n:>3} callers: 1 transaction per event {single:8,.0f}/s   "
                f"group commit {grouped:8,.0f}/s   ({grouped / single:.2f}x)"
            )
    finally:
        await runtime.aclose()


async def fresh_pg(base: str) -> str:
    url = make_url(base)
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


async def drop_pg(db_url: str) -> None:
    url = make_url(db_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
        # Write out what the measurements left in PostgreSQL's buffers now, rather than in its
        # next timed checkpoint, during whatever is measured next.
        await conn.execute(text("CHECKPOINT"))
    await admin.dispose()


def report(label: str, results: list[tuple[str, int, dict[str, Any]]]) -> None:
    """Each endpoint's median over the rounds at each load, the p99 of every round beside it,
    and the most steal any of its rounds saw."""
    rounds: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for name, n, r in results:
        rounds.setdefault((name, n), []).append(r)
    count = max(len(v) for v in rounds.values())
    print(f"\n{label}" + (f", median of {count} rounds in alternating order" if count > 1 else ""))
    print(
        f"| {'what':<46} | in flight | events/s | p50 ms | p99 ms | server CPU us/req |"
        " p99 per round | steal %, most |"
    )
    print(
        f"|{'-' * 48}|----------:|---------:|-------:|-------:|------------------:|"
        "--------------:|--------------:|"
    )
    by: dict[tuple[str, int], float] = {}
    for (name, n), rs in rounds.items():
        med = {k: statistics.median(r.get(k, 0) for r in rs) for k in ("rate", "p50", "p99")}
        cpu = statistics.median(r.get("cpu_us", 0) for r in rs)
        by[(name, n)] = med["rate"]
        steals = [r["steal"] for r in rs if r.get("steal") is not None]
        most = f"{max(steals):.1f}" if steals else "-"
        per_round = ", ".join(f"{r['p99']:.0f}" for r in rs)
        resent = sum(r.get("retried", 0) for r in rs)  # httpx only: sent again after a reset
        print(
            f"| {name:<46} | {n:>9} | {med['rate']:>8,.0f} | {med['p50']:>6.1f} |"
            f" {med['p99']:>6.1f} | {cpu:>17.0f} | {per_round:>13} | {most:>13} |"
            + (f" ({resent} resent)" if resent else "")
        )
    for n in sorted({n for _, n in rounds}):
        group = by[("api_event, group commit", n)]
        print(
            f"  {n} in flight: group commit / 1 transaction per request "
            f"{group / by[('api_event, 1 transaction per request', n)]:.2f}, / bare endpoint "
            f"{group / by[('bare endpoint, 1 insert + commit per request', n)]:.2f}, / hello world "
            f"{group / by[('hello world (POST, no database)', n)]:.2f}"
        )


async def run(argv: list[str] | None = None) -> None:
    """The benchmark, with ``argv`` as its command line (``None``: this process's)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=3000, help="requests per measurement")
    parser.add_argument("--in-flight", default="4,16,64")
    parser.add_argument("--window-ms", type=float, default=2.0)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--writer-only", action="store_true", help="no HTTP: the writer alone")
    parser.add_argument("--seconds", type=float, default=5.0, help="with wrk: per measurement")
    parser.add_argument(
        "--stored", type=int, default=0, help="events stored beforehand (the 10x-data run)"
    )
    parser.add_argument(
        "--compare-stored",
        type=int,
        default=0,
        help="only group commit: a fresh table beside one with this many events stored",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="measurements of each endpoint (default 3; 2 per side with --compare-stored or "
        "--serving), in alternating order; medians are printed",
    )
    parser.add_argument(
        "--no-freeze", action="store_true", help="leave the started heap to the collector"
    )
    parser.add_argument(
        "--serving",
        action="store_true",
        help="only group commit: alone beside with the queue's workers and the sweeps running",
    )
    parser.add_argument("--httpx", action="store_true", help="load from httpx even if wrk exists")
    parser.add_argument(
        "--inline-checkpoints",
        action="store_true",
        help="SQLite: checkpoint inside commits (SQLite's default), not in the background",
    )
    args = parser.parse_args(argv)
    args.in_flight = [int(n) for n in args.in_flight.split(",")]
    if args.rounds is None:
        args.rounds = 2 if args.compare_stored or args.serving else 3
    args.wrk = wrk_load.available() and not args.httpx
    per = f"wrk, {args.seconds:g} s" if args.wrk else f"httpx, {args.events} events"
    print(f"{per} per measurement, group commit window {args.window_ms} ms")
    # The side-by-side modes: each side's name and measurement.
    sides = ("fresh", "stored") if args.compare_stored else ("alone", "serving")
    side_by_side = measure_stored if args.compare_stored else measure_serving
    beside = bool(args.compare_stored or args.serving)
    if not args.skip_pg:
        pg_url = await fresh_pg(args.pg)
        try:
            if args.writer_only:
                await writer_only(pg_url, "PostgreSQL", args)
            elif beside:
                second_url = await fresh_pg(args.pg)
                try:
                    await side_by_side(
                        dict(zip(sides, (pg_url, second_url), strict=True)), "PostgreSQL", args
                    )
                finally:
                    await drop_pg(second_url)
            else:
                report("PostgreSQL", await measure(pg_url, "pg", args))
        finally:
            await drop_pg(pg_url)
    if not args.skip_sqlite:
        tmp = Path(tempfile.mkdtemp(prefix="sweepline-ingest-"))
        lite = f"sqlite+aiosqlite:///{tmp / 'ingest.db'}"
        if args.writer_only:
            await writer_only(lite, "SQLite", args)
        elif beside:
            second = f"sqlite+aiosqlite:///{tmp / f'ingest-{sides[1]}.db'}"
            await side_by_side(dict(zip(sides, (lite, second), strict=True)), "SQLite", args)
        else:
            report("SQLite", await measure(lite, "lite", args))


if __name__ == "__main__":
    uvloop.run(run())
