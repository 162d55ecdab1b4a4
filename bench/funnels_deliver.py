"""Funnel deliverer messages/s into a loopback SMTP server, beside the campaign sender and the
previous deliverer (one SMTP conversation per message, one at a time) measured in the same run.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
        .venv/bin/python bench/funnels_deliver.py [--messages 5000] [--in-flight 8] [--sqlite]

It creates its own database (PostgreSQL, or with ``--sqlite`` a file in a temporary directory),
migrates it, and starts an aiosmtpd server in a child process on a free loopback port (so the
server does not share the senders' interpreter) that counts what it accepts by Message-ID.
Measured, one after the other, each on ``--messages`` fresh contacts:

* the funnel deliverer as one deliverer job runs it: batches leased from the outbox,
  ``--in-flight`` messages on the wire over persistent connections (``SmtpPool``), outcomes
  recorded several per transaction, suppression checked at send time, unsubscribe headers and
  footer added to each (marketing) message;
* the campaign sender on a campaign of the same size (``--in-flight`` persistent connections);
* the previous deliverer: one message at a time, one SMTP conversation each (``MailSender``), on
  ``--messages // 10`` effects (it is slow).

Every phase checks that each message arrived exactly once (by Message-ID) and that every effect
or recipient is recorded sent.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from mail_sink import Sink  # noqa: E402  (the benchmark folder's own helper)

from app import event_loop  # noqa: E402
from app.clock import SystemClock  # noqa: E402
from app.db.migrate import upgrade  # noqa: E402
from app.db.session import Database  # noqa: E402
from app.engines.funnels.campaigns.due.audience import materialise  # noqa: E402
from app.engines.funnels.campaigns.models import Recipient  # noqa: E402
from app.engines.funnels.campaigns.service import CampaignData, create_campaign  # noqa: E402
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done  # noqa: E402
from app.engines.funnels.campaigns.work.transport import SmtpPool as CampaignPool  # noqa: E402
from app.engines.funnels.events.tracking import Tracking  # noqa: E402
from app.engines.funnels.models import OUTBOX_SENT, Contact, OutboxEffect  # noqa: E402
from app.engines.funnels.outbox.channel import ChannelSender  # noqa: E402
from app.engines.funnels.outbox.work.deliver import Deliverer  # noqa: E402
from app.engines.funnels.outbox.work.email import EmailChannel  # noqa: E402
from app.heap import freeze_startup_heap  # noqa: E402
from app.integrations.mail import MailSender, SmtpPool  # noqa: E402
from app.platform.models import Organisation, Workspace  # noqa: E402
from app.settings import DatabaseSettings, FunnelSettings, MailSettings  # noqa: E402

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SIGNING = Tracking("http://sweepline.bench", "bench-secret")


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


async def workspace(db: Database) -> int:
    async with db.write() as uow:
        org = Organisation(name="bench", created_at=NOW)
        uow.session.add(org)
        await uow.session.flush()
        ws = Workspace(
            organisation_id=org.id,
            name="bench",
            timezone="UTC",
            ingest_token_hash=uuid.uuid4().hex,
            webhook_secret_encrypted=b"-",
            allow_private_http=False,
            created_at=NOW,
        )
        uow.session.add(ws)
        await uow.session.flush()
        return ws.id


async def contacts(db: Database, ws: int, prefix: str, n: int) -> list[int]:
    async with db.write() as uow:
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": ws,
                    "email": f"{prefix}{i}@bench.test",
                    "first_name": f"C{i}",
                    "last_name": "",
                    "timezone": "UTC",
                    "fields": {},
                    "consent": {},
                    "suppressed": {},
                    "created_at": NOW,
                    "updated_at": NOW,
                }
                for i in range(n)
            ],
        )
        return list(
            await uow.session.scalars(
                select(Contact.id).where(Contact.email.like(f"{prefix}%")).order_by(Contact.id)
            )
        )


async def effects(db: Database, ws: int, prefix: str, n: int) -> None:
    ids = await contacts(db, ws, prefix, n)
    async with db.write() as uow:
        await uow.session.execute(
            insert(OutboxEffect),
            [
                {
                    "workspace_id": ws,
                    "contact_id": cid,
                    "node_id": "mail",
                    "channel": "email",
                    "idempotency_key": f"{prefix}-run-{cid}-step-1",
                    "payload": {
                        "to": [f"{prefix}{i}@bench.test"],
                        "subject": f"Hello C{i}",
                        "text": "Hello,\n\nthe news of the week: https://example.com/news\n",
                        "html": None,
                        "message_id": f"<{prefix}-run-{cid}-step-1.w{ws}@bench.test>",
                        "topic": "marketing",
                    },
                    "status": "pending",
                    "attempts": 0,
                    "next_attempt_at": NOW,
                    "created_at": NOW,
                }
                for i, cid in enumerate(ids)
            ],
        )


async def sent_effects(db: Database, prefix: str) -> int:
    async with db.read() as s:
        return int(
            await s.scalar(
                select(func.count())
                .select_from(OutboxEffect)
                .where(
                    OutboxEffect.idempotency_key.like(f"{prefix}-%"),
                    OutboxEffect.status == OUTBOX_SENT,
                )
            )
            or 0
        )


async def signing(workspace_id: int) -> Tracking:
    return SIGNING


async def deliverer_rate(
    db: Database, mail: MailSettings, ws: int, n: int, in_flight: int, *, pooled: bool, sink: Sink
) -> float:
    prefix = f"d{in_flight}{'p' if pooled else 's'}"
    await effects(db, ws, prefix, n)
    transport: Any = SmtpPool(mail, in_flight) if pooled else MailSender(mail)
    channel: ChannelSender = EmailChannel(transport, signing=signing)
    clock = SystemClock()
    settings = FunnelSettings(deliver_batch=50, lease_seconds=120)
    deliverer = Deliverer(
        db,
        settings,
        lambda c: channel if c == "email" else None,
        lease_seconds=120,
        clock=clock,
        in_flight=in_flight,
    )
    started = time.perf_counter()
    while (await deliverer.run_batch(owner="bench-deliverer", now=clock.now)).leased:
        pass
    elapsed = time.perf_counter() - started
    if pooled:
        await transport.aclose()
    got = sink.take()
    assert (got.total, got.distinct) == (n, n), (got, n)
    assert await sent_effects(db, prefix) == n
    return n / elapsed


async def campaign_rate(
    db: Database, mail: MailSettings, n: int, in_flight: int, sink: Sink
) -> float:
    ws = await workspace(db)  # its own: the audience is the whole workspace
    await contacts(db, ws, "camp", n)
    async with db.write() as uow:
        campaign = await create_campaign(
            uow.session,
            ws,
            CampaignData(
                name="bench",
                subject="Hello {{first_name}}",
                body="Hello,\n\nthe news of the week: https://example.com/news\n",
                rate_per_minute=100_000,
            ),
            NOW,
        )
        campaign_id = campaign.id
    async with db.write() as uow:
        assert await materialise(uow.session, campaign_id, NOW) == n
    pool = CampaignPool(mail, in_flight)
    sender = CampaignSender(
        db, pool, owner="bench-campaign", domain="bench.test", in_flight=in_flight, signing=SIGNING
    )
    # As the worker process does once it has started (app.heap): the measured loop's full
    # collections then walk what it made, not the start-up heap and the seeded data's leftovers.
    freeze_startup_heap()
    started = time.perf_counter()
    assert await send_until_done(sender, campaign_id, SystemClock()) is True
    elapsed = time.perf_counter() - started
    await pool.aclose()
    got = sink.take()
    assert (got.total, got.distinct) == (n, n), (got, n)
    async with db.read() as s:
        sent = await s.scalar(
            select(func.count())
            .select_from(Recipient)
            .where(Recipient.campaign_id == campaign_id, Recipient.status == "sent")
        )
    assert sent == n
    return n / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--sqlite", action="store_true")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    if args.sqlite:
        url = f"sqlite+aiosqlite:///{tmp.name}/bench.db"
    else:
        base = os.environ.get(
            "BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres"
        )
        url = await create_database(base)
    sink = Sink()
    try:
        await upgrade(url)
        db = Database(DatabaseSettings(url=url, pool_size=args.in_flight + 4))
        mail = MailSettings(
            smtp_host="127.0.0.1",
            smtp_port=sink.port,
            from_address="news@bench.test",
            timeout_seconds=30,
        )
        ws = await workspace(db)
        n, k = args.messages, args.in_flight
        backend = "SQLite" if args.sqlite else "PostgreSQL"
        print(f"{backend}, {n:,} messages per phase, aiosmtpd on loopback (own process)")
        rate = await deliverer_rate(db, mail, ws, n, k, pooled=True, sink=sink)
        print(f"funnel deliverer, {k} in flight, persistent connections: {rate:,.0f} messages/s")
        rate = await campaign_rate(db, mail, n, k, sink)
        print(f"campaign sender, {k} in flight, persistent connections: {rate:,.0f} messages/s")
        small = max(50, n // 10)
        rate = await deliverer_rate(db, mail, ws, small, 1, pooled=False, sink=sink)
        print(
            f"previous deliverer, 1 at a time, one conversation per message ({small:,} messages): "
            f"{rate:,.0f} messages/s"
        )
        await db.dispose()
    finally:
        sink.stop()
        if not args.sqlite:
            await drop_database(url)
        tmp.cleanup()


if __name__ == "__main__":
    # The loop the worker process runs on, so the figures are the deployed ones.
    event_loop.run(main())
