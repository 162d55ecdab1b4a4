"""Applying stored events (``process_batch``): each event in its own savepoint beside the
set-based path, in the same run, on PostgreSQL and SQLite.

    .venv/bin/python bench/ingest_apply.py [--events 20000] [--contacts 5000] [--pg URL] \\
        [--skip-pg] [--skip-sqlite] [--rounds 2] [--baseline DIR]

Each measurement gets a workspace of its own with ``--contacts`` contacts and ``--events`` stored
events (API events by e-mail and by id, new contacts some of them named twice, site visits,
tracking opens, a few unknown contacts), then applies them batch after batch (``batch_events``:
200 a transaction on PostgreSQL, 10 on SQLite) until none is left. The two paths alternate,
``--rounds`` times each. Printed per path: events per second, the process's CPU per event
(``time.process_time``: Python, the driver and, on SQLite, the database itself; PostgreSQL's
server is another process) and the SQL statements per event. The per-event path is
``process_batch(one_by_one=True)``, which applies every event as forms and delivery reports
still are: what every event went through before. ``--baseline DIR`` measures, in the same run,
the code checked out in DIR too (a ``git worktree`` of an earlier commit, with its own .venv):
this script runs there with that tree's ``app`` on its path, on a database of its own.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The application measured: this repository's, or the baseline tree's when run for it.
sys.path.insert(0, os.environ.get("INGEST_APPLY_TREE") or str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(sys.path[0]) / "bench"))

import uvloop
from ingest_group_commit import drop_pg, fresh_pg, settings_for, workspace
from sqlalchemy import event, func, insert, select

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.engines.funnels.events.ingest import process_batch
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.events.tracking import MessageRef
from app.engines.funnels.models import Contact
from app.runtime import Runtime
from app.wiring import assemble


async def contacts(runtime: Runtime, ws: int, n: int) -> list[int]:
    """``n`` contacts (the model's defaults; only what a baseline tree has too)."""
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        uow.session.add_all(
            Contact(
                workspace_id=ws, email=f"c{i}.w{ws}@example.com", created_at=now, updated_at=now
            )
            for i in range(n)
        )
        await uow.session.flush()
        ids = await uow.session.scalars(
            select(Contact.id).where(Contact.workspace_id == ws).order_by(Contact.id)
        )
        return list(ids)


def payload(i: int, ws: int, ids: list[int]) -> tuple[str, str, dict[str, Any]]:
    """Event ``i``: its source, name and payload (the mix of a busy workspace)."""
    known = ids[(i * 7919) % len(ids)]
    slot = i % 20
    if slot < 7:  # an API event about a known address, in any case
        email = f" C{(i * 7919) % len(ids)}.w{ws}@Example.com"
        return "api", "order_placed", {"contact": {"email": email}, "properties": {"n": i}}
    if slot < 10:  # about a contact id
        return "api", "order_placed", {"contact": {"id": known}, "properties": {"n": i}}
    if slot < 13:  # a new person (every other one named by the event before it too)
        who = {"email": f"new{i // 2}.w{ws}@example.com", "first_name": "New"}
        return "api", "signed_up", {"contact": who, "create": True}
    if slot < 16:
        return "site", "page_visit", {"contact_id": known, "url": f"/p/{i}", "title": "P"}
    if slot < 19:
        ref = MessageRef(ws, known).claims()
        return "tracking", "message_opened", {"ref": ref}
    return "api", "order_placed", {"contact": {"id": 10**12 + i}}  # unknown: dropped


async def stage(runtime: Runtime, n_events: int, n_contacts: int) -> int:
    """A workspace with its contacts and ``n_events`` stored, unprocessed events."""
    ws, _token = await workspace(runtime)
    ids = await contacts(runtime, ws, n_contacts)
    now = runtime.clock.now()
    rows = []
    for i in range(n_events):
        source, name, body = payload(i, ws, ids)
        rows.append(
            {
                "workspace_id": ws,
                "source": source,
                "name": name,
                "external_id": f"w{ws}-{i}",
                "payload": body,
                "received_at": now,
            }
        )
    async with runtime.db.write() as uow:
        for start in range(0, n_events, 1000):
            await uow.session.execute(insert(InboundEvent), rows[start : start + 1000])
    return ws


async def apply_all(runtime: Runtime, *, one_by_one: bool) -> dict[str, float]:
    statements = 0

    def count(*_args: Any) -> None:
        nonlocal statements
        statements += 1

    target = runtime.db.write_engine.sync_engine
    event.listen(target, "before_cursor_execute", count)
    processed = recorded = 0
    # A baseline tree's process_batch applies every event in its own savepoint, unasked.
    kw = {"one_by_one": True} if "one_by_one" in inspect.signature(process_batch).parameters else {}
    if not one_by_one:
        kw = {}
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        while True:
            result = await process_batch(runtime.db, now=runtime.clock.now(), **kw)
            if result.processed == 0:
                break
            processed += result.processed
            recorded += result.recorded
    finally:
        event.remove(target, "before_cursor_execute", count)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "rate": processed / wall,
        "cpu_ms": 1000 * cpu / processed,
        "statements": statements / processed,
        "recorded": recorded,
        "processed": processed,
    }


async def measure(
    db_url: str, paths: list[str], args: argparse.Namespace
) -> dict[str, list[dict[str, float]]]:
    await upgrade(db_url)
    runtime = assemble(settings_for(db_url, 2.0), SystemClock())
    try:
        results: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name in paths:
                await stage(runtime, args.events, args.contacts)
                results[name].append(await apply_all(runtime, one_by_one=name != "set-based"))
        async with runtime.db.read() as s:
            unprocessed = await s.scalar(
                select(func.count()).where(InboundEvent.processed_at.is_(None))
            )
        assert unprocessed == 0
        return results
    finally:
        await runtime.aclose()


def baseline(label: str, args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    """The baseline tree's per-event path, measured by this script run with that tree's app."""
    skip = "--skip-sqlite" if label == "PostgreSQL" else "--skip-pg"
    command = [str(Path(args.baseline) / ".venv/bin/python"), __file__, skip, "--json"]
    command += ["--events", str(args.events), "--contacts", str(args.contacts)]
    command += ["--rounds", str(args.rounds), "--pg", args.pg]
    env = {**os.environ, "INGEST_APPLY_TREE": str(Path(args.baseline).resolve())}
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    found: dict[str, list[dict[str, float]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"baseline": found["one by one"]}


def report(
    label: str, results: dict[str, list[dict[str, float]]], args: argparse.Namespace
) -> None:
    print(
        f"{label}: {args.events} events a measurement, {args.contacts} contacts, "
        f"medians of {args.rounds}"
    )
    print(f"  {'path':<12} {'events/s':>9} {'CPU ms/event':>13} {'statements/event':>17}")
    base = None
    for name, runs in results.items():
        rate = statistics.median(r["rate"] for r in runs)
        cpu = statistics.median(r["cpu_ms"] for r in runs)
        per = statistics.median(r["statements"] for r in runs)
        base = base or rate
        print(f"  {name:<12} {rate:9.0f} {cpu:13.3f} {per:17.2f}   ({rate / base:.2f}x)")
    # The same events recorded (and dropped) by every path and round.
    assert len({r["recorded"] for runs in results.values() for r in runs}) == 1, results


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--contacts", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--baseline", help="a worktree of an earlier commit, measured too")
    parser.add_argument("--json", action="store_true", help="print the per-event path as JSON")
    args = parser.parse_args()
    # Only the per-event path in a baseline tree (its process_batch has no other).
    paths = ["one by one"] if args.json else ["one by one", "set-based"]
    for label in ("PostgreSQL", "SQLite"):
        if args.skip_pg if label == "PostgreSQL" else args.skip_sqlite:
            continue
        results = baseline(label, args) if args.baseline else {}
        if label == "PostgreSQL":
            url = await fresh_pg(args.pg)
            try:
                results.update(await measure(url, paths, args))
            finally:
                await drop_pg(url)
        else:
            tmp = Path(tempfile.mkdtemp(prefix="sweepline-apply-"))
            results.update(await measure(f"sqlite+aiosqlite:///{tmp / 'apply.db'}", paths, args))
        if args.json:
            print(json.dumps(results))
        else:
            report(label, results, args)


if __name__ == "__main__":
    uvloop.run(main())
