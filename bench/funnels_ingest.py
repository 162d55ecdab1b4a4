"""Event ingestion (``api_event``) beside a hello world and a bare insert, and the campaign send
rate to a local SMTP server beside raw SMTP sends, measured in the same run.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
        .venv/bin/python bench/funnels_ingest.py [--seconds 3] [--ingest-in-flight 4,16,64] \\
        [--ingest-rounds 3] [--skip-sqlite] [--recipients 2000] [--in-flight 8]

Printed:

* ingestion, on PostgreSQL and SQLite (``bench/ingest_group_commit.py``, whose other modes —
  1,000,000 events stored, the workers and sweeps running, the writer alone — it has on its own
  command line): ``POST /hooks/funnels/events`` of the real application with group commit,
  events per second with p50 and p99 latency and the server's CPU per request at each number of
  requests in flight (medians of ``--ingest-rounds`` rounds in alternating order, with the
  hypervisor's steal time), from wrk in a separate process, beside a Litestar hello world, a bare
  endpoint with one insert and one commit per request, and the application's endpoint with one
  transaction per request, in the same run;
* campaigns (PostgreSQL, a database of its own, created and dropped): messages per second of the
  campaign sender (snapshot, suppression check at send time, rendering, sends over
  ``--in-flight`` persistent SMTP connections, outcomes committed as they arrive) to a local SMTP
  sink, beside the same number of raw SMTP sends over the same connections with no database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

# Run as a plain script from any directory: make the repository's `app` package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest_group_commit
import uvloop
from cryptography.fernet import Fernet
from sqlalchemy import insert, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import Contact
from app.integrations.mail import OutgoingEmail
from app.platform import service
from app.sandbox.smtp import ReceivedMessage, SmtpSink
from app.settings import MailSettings, load_settings
from app.wiring import assemble

MESSAGE_ID = re.compile(rb"^Message-ID:\s*(<[^>]+>)", re.MULTILINE | re.IGNORECASE)


class CountingSink(SmtpSink):
    """Keeps the envelope and Message-ID only (the measurement is of the sender, not of
    parsing MIME in the sink)."""

    def _receive(self, envelope: Any) -> str:
        raw = envelope.original_content or envelope.content
        found = MESSAGE_ID.search(raw if isinstance(raw, bytes) else raw.encode())
        with self._lock:
            self.messages.append(
                ReceivedMessage(
                    message_id=found.group(1).decode() if found else "",
                    to=list(envelope.rcpt_tos),
                    mail_from=envelope.mail_from,
                    subject="",
                    body="",
                    html=None,
                    headers={},
                    raw=b"",
                )
            )
        return "250 OK"


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


async def campaign(db_url: str, args: argparse.Namespace) -> None:
    settings = load_settings(
        {
            "DATABASE_URL": db_url,
            "ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "SESSION_SECRET": uuid.uuid4().hex,
        }
    )
    runtime = assemble(settings, SystemClock())
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name="Mail", now=now)
        created = await service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=org.id,
            name="Mail",
            timezone="UTC",
            now=now,
        )
        ws = created.workspace.id
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": ws,
                    "email": f"r{i}@example.com",
                    "first_name": f"R{i}",
                    "last_name": "",
                    "timezone": "UTC",
                    "fields": {},
                    "consent": {},
                    "suppressed": {},
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(args.recipients)
            ],
        )
        c = await create_campaign(
            uow.session,
            ws,
            CampaignData(
                name="b", subject="Hi {{first_name}}", body="News", rate_per_minute=100_000
            ),
            now,
        )
    async with runtime.db.write() as uow:
        await materialise(uow.session, c.id, now)
    with CountingSink() as sink:
        mail = MailSettings(
            smtp_host=sink.host,
            smtp_port=sink.port,
            from_address="b@bench.example",
            timeout_seconds=30,
        )
        pool = SmtpPool(mail, args.in_flight)
        window = asyncio.Semaphore(args.in_flight)

        async def raw(i: int) -> None:
            async with window:
                await pool.send(
                    OutgoingEmail(
                        to=[f"raw{i}@example.com"],
                        subject=f"Hi R{i}",
                        text="News",
                        message_id=f"<raw{i}@bench>",
                    )
                )

        began = time.perf_counter()
        await asyncio.gather(*(raw(i) for i in range(args.recipients)))
        raw_rate = args.recipients / (time.perf_counter() - began)
        sender = CampaignSender(
            runtime.db,
            pool,
            owner="bench",
            domain="bench.example",
            in_flight=args.in_flight,
            signing=Tracking("http://bench.example", "bench-secret"),
        )
        began = time.perf_counter()
        assert await send_until_done(sender, c.id, runtime.clock)
        rate = args.recipients / (time.perf_counter() - began)
        await pool.aclose()
        assert len(sink.count_by_message_id()) == 2 * args.recipients
    await runtime.aclose()
    print(f"campaign send, {args.recipients} recipients, {args.in_flight} in flight")
    print(f"  raw SMTP sends (no database) {raw_rate:8.0f} messages/s")
    print(f"  campaign sender              {rate:8.0f} messages/s   ({rate / raw_rate:.2f}x)")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--seconds", type=float, default=3, help="ingestion: wrk seconds per measurement"
    )
    parser.add_argument(
        "--ingest-in-flight", default="4,16,64", help="ingestion: requests in flight"
    )
    parser.add_argument(
        "--ingest-rounds", default="3", help="ingestion: rounds of each measurement (medians)"
    )
    parser.add_argument("--skip-sqlite", action="store_true", help="ingestion on PostgreSQL only")
    parser.add_argument("--recipients", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=8, help="campaigns: SMTP connections")
    args = parser.parse_args()
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    # Ingestion: the group-commit endpoint beside hello world, the bare insert and one transaction
    # per request, on both databases (bench/ingest_group_commit.py, which has more modes).
    ingest = ["--seconds", str(args.seconds), "--in-flight", args.ingest_in_flight, "--pg", base]
    ingest += ["--rounds", args.ingest_rounds]
    await ingest_group_commit.run(ingest + (["--skip-sqlite"] if args.skip_sqlite else []))
    db_url = await create_database(base)
    try:
        await upgrade(db_url)
        await campaign(db_url, args)
    finally:
        await drop_database(db_url)


if __name__ == "__main__":
    uvloop.run(main())
