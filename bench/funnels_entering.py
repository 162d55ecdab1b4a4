"""Contacts entering a funnel (``contact_created`` matched) on PostgreSQL: the set-wise matcher
beside the per-contact admission it replaced, measured in the same run on the same rows.

    .venv/bin/python bench/funnels_entering.py [--contacts 10000] [--workers 4] [--rounds 2] \\
        [--pg URL]

It creates its own database: one workspace, ``--contacts`` contacts each with a
``contact_created`` event, and two funnels triggered by it — one without an entry predicate, one
whose entry predicate admits nine contacts in ten. Each measurement resets the events to unmatched
and deletes the runs, then ``--workers`` matcher tasks drain the events (500 per claim):

* **set-wise** (``match_events``): per funnel version, the entry predicate is one SQL query for
  the whole batch, and the runs are one multi-row insert;
* **per contact** (the previous matcher, reproduced here as the baseline): the entry predicate
  loads each contact and its facts and is evaluated in Python, one contact at a time; the runs
  are the same multi-row insert.

Printed: contacts entering per second (runs started / time), median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Run as a plain script from any directory: make the repository's `app` package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.migrate import upgrade
from app.db.session import Database, WriteSession
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.definitions.graph import graph_for_version
from app.engines.funnels.events.claim.triggers import (
    CLAIM,
    StoredEvent,
    _as_dict,
    _segment_entries,
    _wake_waiting,
    admit,
    match_events,
    trigger_matches,
)
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import Contact, ContactEvent, Funnel, FunnelVersion
from app.engines.funnels.runs.due.entry import enter_many, published_versions
from app.platform.models import Organisation, Workspace
from app.settings import DatabaseSettings

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NODES: list[dict[str, Any]] = [{"kind": "add_tag", "id": "t", "tag": "entered", "entry": True}]
PLAIN = {"triggers": [{"kind": "contact_created"}], "nodes": NODES}
GATED = {
    "triggers": [{"kind": "contact_created"}],
    "nodes": NODES,
    "entry_predicate": {"kind": "field", "field": "first_name", "op": "eq", "value": "In"},
}


async def seed(db: Database, contacts: int) -> int:
    async with db.write() as uow:
        s = uow.session
        org = Organisation(name="bench", created_at=NOW)
        s.add(org)
        await s.flush()
        ws = Workspace(
            organisation_id=org.id,
            name="bench",
            timezone="UTC",
            ingest_token_hash=uuid.uuid4().hex,
            webhook_secret_encrypted=b"-",
            allow_private_http=False,
            created_at=NOW,
        )
        s.add(ws)
        await s.flush()
        for name, definition in (("plain", PLAIN), ("gated", GATED)):
            funnel = Funnel(
                workspace_id=ws.id,
                name=name,
                draft=definition,
                active=True,
                created_at=NOW,
                updated_at=NOW,
            )
            s.add(funnel)
            await s.flush()
            version = FunnelVersion(
                funnel_id=funnel.id,
                workspace_id=ws.id,
                number=1,
                definition=definition,
                reentry=False,
                published_at=NOW,
            )
            s.add(version)
            await s.flush()
            funnel.current_version_id = version.id
        workspace_id = ws.id
    async with db.write() as uow:
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": workspace_id,
                    "email": f"c{i}@bench.test",
                    "first_name": "Out" if i % 10 == 0 else "In",
                    "last_name": "",
                    "timezone": "UTC",
                    "fields": {},
                    "consent": {},
                    "suppressed": {},
                    "created_at": NOW,
                    "updated_at": NOW,
                }
                for i in range(contacts)
            ],
        )
        ids = list(await uow.session.scalars(select(Contact.id)))
        rows = [
            {
                "workspace_id": workspace_id,
                "contact_id": cid,
                "name": "contact_created",
                "source": "system",
                "properties": {},
                "occurred_at": NOW,
                "created_at": NOW,
            }
            for cid in ids
        ]
        for start in range(0, len(rows), 5000):
            await uow.session.execute(insert(ContactEvent), rows[start : start + 5000])
    return workspace_id


async def reset(db: Database) -> None:
    async with db.write() as uow:
        await uow.session.execute(text("DELETE FROM funnel_runs"))
        await uow.session.execute(text("UPDATE contact_events SET matched_at = NULL"))
    async with db.write() as uow:
        await uow.session.execute(text("ANALYZE"))


async def match_per_contact(session: WriteSession, events: list[StoredEvent]) -> int:
    """The previous matcher's entry path: ``admit`` (load, evaluate) once per contact."""
    await _wake_waiting(session, events, NOW)
    by_ws: dict[int, list[StoredEvent]] = defaultdict(list)
    for event in events:
        by_ws[event.workspace_id].append(event)
    funnels = await published_versions(session, sorted(by_ws))
    live = set(
        await session.scalars(
            select(Contact.id).where(
                Contact.id.in_({e.contact_id for e in events}), Contact.deleted_at.is_(None)
            )
        )
    )
    entries: list[tuple[FunnelVersion, int]] = []
    for ws, ws_events in by_ws.items():
        candidates = [v for f, v in funnels if f.workspace_id == ws]
        custom: dict[str, str] | None = None
        for event in ws_events:
            if event.contact_id not in live:
                continue
            for version in candidates:
                graph = graph_for_version(version.id, version.definition)
                if not any(trigger_matches(t, event) for t in graph.definition.triggers):
                    continue
                if graph.definition.entry_predicate is not None:
                    custom = custom if custom is not None else await field_types(session, ws)
                    if not await admit(session, version, event.contact_id, NOW, custom):
                        continue
                entries.append((version, event.contact_id))
    started = await enter_many(session, entries, now=NOW)
    return started + await _segment_entries(session, by_ws, live, NOW, evaluate_segments)


async def drain_per_contact(db: Database) -> int:
    started = 0
    while True:
        async with db.write() as uow:
            rows = await CLAIM.take_in(uow.session, now=NOW, limit=500)
            if not rows:
                return started
            events = [
                StoredEvent(r[0], r[1], r[2], r[3], r[4], _as_dict(r[5]))
                for r in sorted(rows, key=lambda r: r[0])
            ]
            started += await match_per_contact(uow.session, events)


async def drain_set_wise(db: Database) -> int:
    started = 0
    while True:
        events, entered = await match_events(db, now=NOW, limit=500, segments=evaluate_segments)
        started += entered
        if events == 0:
            return started


async def measure(db: Database, workers: int, per_contact: bool, expected: int) -> float:
    await reset(db)
    drain = drain_per_contact if per_contact else drain_set_wise
    began = time.perf_counter()
    started = sum(await asyncio.gather(*(drain(db) for _ in range(workers))))
    elapsed = time.perf_counter() - began
    assert started == expected, (started, expected)
    return started / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contacts", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    args = parser.parse_args()
    url = make_url(args.pg)
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    db_url = url.set(database=name).render_as_string(hide_password=False)
    try:
        await upgrade(db_url)
        db = Database(DatabaseSettings(url=db_url, pool_size=args.workers + 2))
        await seed(db, args.contacts)
        # Every contact enters the plain funnel; nine in ten pass the gated one's predicate.
        expected = args.contacts + args.contacts * 9 // 10
        rates: dict[str, list[float]] = {"per contact": [], "set-wise": []}
        for _ in range(args.rounds):
            rates["per contact"].append(await measure(db, args.workers, True, expected))
            rates["set-wise"].append(await measure(db, args.workers, False, expected))
        await db.dispose()
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()
    print(
        f"{args.contacts:,} contacts, contact_created into 2 funnels (one with an entry "
        f"predicate), {args.workers} matchers, median of {args.rounds} rounds"
    )
    for label, values in rates.items():
        rate = statistics.median(values)
        print(
            f"  {label:<12} {rate:>9,.0f} runs started/s   "
            f"{rate * args.contacts / expected:>9,.0f} contacts entering/s"
        )
    ratio = statistics.median(rates["set-wise"]) / statistics.median(rates["per contact"])
    print(f"  set-wise / per contact: {ratio:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
