"""The ``date_field`` sweep tick on PostgreSQL, beside the full read it replaced, in the same run.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
        /tmp/venv0/bin/python bench/funnels_date_sweep.py [--contacts 100000] [--ticks 30]

It creates its own database and migrates it, writes ``--contacts`` contacts with birthdays spread
over the year (time zones from UTC-11 to UTC+14) and publishes a funnel with a yearly birthday
trigger at 9 am. Printed, as the median of ``--ticks`` ten-second ticks from 08:58 UTC:

* sweep: one real tick of :func:`fire_date_triggers` (watermark, the candidate days' contacts
  read, each due occurrence recorded and entered);
* baseline: what every tick did before: read every contact's date and time zone and check each
  in Python (no fires recorded, so the baseline is if anything flattered).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.fernet import Fernet
from sqlalchemy import insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import ManualClock
from app.db.migrate import upgrade
from app.engines.funnels.contacts.fields import define_field
from app.engines.funnels.contacts.memberships import ensure_names
from app.engines.funnels.definitions.graph import DateField
from app.engines.funnels.definitions.service import create_funnel, parse_definition, publish
from app.engines.funnels.events.due.date_triggers import due_occurrence, fire_date_triggers
from app.engines.funnels.models import Contact, Tag
from app.platform import service
from app.settings import load_settings
from app.wiring import assemble

ZONES = ["Pacific/Pago_Pago", "America/New_York", "UTC", "Europe/Berlin", "Asia/Tokyo"]
ZONES += ["Asia/Kolkata", "Pacific/Kiritimati"]  # seven zones: every day meets every zone
TRIGGER = DateField(field="birthday", hour=9, yearly=True)


async def create_database(base: str) -> str:
    url = make_url(base)
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


async def drop_database(db_url: str) -> None:
    url = make_url(db_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    await admin.dispose()


async def run(db_url: str, contacts: int, ticks: int) -> None:
    settings = load_settings(
        {
            "DATABASE_URL": db_url,
            "ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "SESSION_SECRET": uuid.uuid4().hex,
            "SWEEPERS_ENABLED": "false",
            "LOG_LEVEL": "WARNING",
        }
    )
    clock = ManualClock(datetime(2026, 3, 5, 8, 0, tzinfo=UTC))
    runtime = assemble(settings, clock)
    now = clock.now()
    async with runtime.db.write() as uow:
        s = uow.session
        org = await service.create_organisation(s, name="Bench", now=now)
        created = await service.create_workspace(
            s, runtime.secrets, organisation_id=org.id, name="Bench", timezone="UTC", now=now
        )
        ws = created.workspace.id
        await define_field(s, ws, "birthday", "date")
        await ensure_names(s, Tag, ws, ["birthday"])
    rows = [
        {
            "workspace_id": ws,
            "email": f"p{i}@example.com",
            "timezone": ZONES[i % len(ZONES)],
            "fields": {"birthday": (date(1980, 1, 1) + timedelta(days=i % 366)).isoformat()},
            "consent": {},
            "suppressed": {},
            "created_at": now,
            "updated_at": now,
        }
        for i in range(contacts)
    ]
    async with runtime.db.write() as uow:
        for i in range(0, len(rows), 5000):
            await uow.session.execute(insert(Contact), rows[i : i + 5000])
    definition = {
        "nodes": [{"kind": "add_tag", "id": "t", "tag": "birthday", "entry": True}],
        "triggers": [{"kind": "date_field", "field": "birthday", "hour": 9, "yearly": True}],
        "settings": {"reentry": True},
    }
    async with runtime.db.write() as uow:
        funnel = await create_funnel(
            uow.session, ws, "Birthdays", parse_definition(definition), now
        )
        await publish(uow.session, ws, funnel.id, user_id=None, now=now)
        await uow.session.execute(text("ANALYZE contacts"))
    clock.set(datetime(2026, 3, 5, 8, 58, tzinfo=UTC))  # the ticks cross 9 am UTC
    async with runtime.db.write() as uow:
        await fire_date_triggers(uow.session, now=clock.now())  # the first tick looks back a day

    sweep_ms: list[float] = []
    base_ms: list[float] = []
    started = 0
    for _ in range(ticks):
        clock.advance(seconds=10)
        t0 = time.perf_counter()
        async with runtime.db.write() as uow:
            started += await fire_date_triggers(uow.session, now=clock.now())
        sweep_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        async with runtime.db.read() as session:
            value = Contact.fields["birthday"].as_string()
            everyone = (
                await session.execute(
                    select(Contact.id, Contact.timezone, value).where(
                        Contact.workspace_id == ws,
                        Contact.deleted_at.is_(None),
                        value.is_not(None),
                    )
                )
            ).all()
        due = sum(1 for _, tz, raw in everyone if due_occurrence(TRIGGER, raw, tz, clock.now()))
        base_ms.append((time.perf_counter() - t0) * 1000)
    print(f"contacts: {contacts}, ticks: {ticks} (10 s apart), runs started: {started}")
    print(f"date_field sweep tick:          median {statistics.median(sweep_ms):8.1f} ms")
    print(
        f"baseline (read every contact):  median {statistics.median(base_ms):8.1f} ms"
        f"  ({len(everyone)} rows read per tick, {due} due in the last day)"
    )
    await runtime.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contacts", type=int, default=100_000)
    parser.add_argument("--ticks", type=int, default=30)
    args = parser.parse_args()
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    db_url = await create_database(base)
    try:
        await upgrade(db_url)
        await run(db_url, args.contacts, args.ticks)
    finally:
        await drop_database(db_url)


if __name__ == "__main__":
    asyncio.run(main())
