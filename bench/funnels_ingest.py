"""Event ingestion (``api_event``) on PostgreSQL beside a bare endpoint doing the same insert, and
the campaign send rate to a local SMTP server beside raw SMTP sends, measured in the same run.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
        /tmp/venv0/bin/python bench/funnels_ingest.py [--seconds 10] [--concurrency 4] \\
        [--recipients 2000] [--in-flight 8]

It creates its own database and migrates it. Printed:

* ingestion: ``POST /hooks/funnels/events`` of the real application (ingest-token
  authentication, body validation, one ``INSERT … ON CONFLICT DO NOTHING``, a debounced request
  for processing) — events per second, p50 and p99 latency — beside a bare Litestar endpoint that
  runs the same single insert through the same database layer with no authentication or
  validation. Both are served by uvicorn on loopback and driven by the same client with
  ``--concurrency`` requests in flight;
* campaigns: messages per second of the campaign sender (snapshot, suppression check at send
  time, rendering, sends over ``--in-flight`` persistent SMTP connections, outcomes committed as
  they arrive) to a local SMTP sink, beside the same number of raw SMTP sends over the same
  connections with no database at all.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Run as a plain script from any directory: make the repository's `app` package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import msgspec
from cryptography.fernet import Fernet
from litestar import Litestar, Request, post
from sqlalchemy import insert, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.engines.funnels.campaigns.audience import materialise
from app.engines.funnels.campaigns.send import CampaignSender, SmtpPool, send_until_done
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.events.ingest import store
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import Contact
from app.integrations.mail import OutgoingEmail
from app.platform import service
from app.sandbox.base import serve_in_loop
from app.sandbox.smtp import ReceivedMessage, SmtpSink
from app.settings import MailSettings, load_settings
from app.web.app import create_app
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


async def drive(
    url: str, path: str, headers: dict[str, str], events: int, concurrency: int, tag: str
) -> tuple[float, list[float]]:
    """``events`` POSTs with ``concurrency`` in flight; (events per second, latencies in ms)."""
    latencies: list[float] = []
    counter = iter(range(events))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:

        async def worker() -> None:
            for i in counter:
                body = {
                    "event_id": f"{tag}-{i}",
                    "name": "order_placed",
                    "contact": {"email": f"c{i % 500}@example.com"},
                    "properties": {"total": i},
                }
                started = time.perf_counter()
                response = await client.post(path, json=body, headers=headers)
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code != 202:
                    raise RuntimeError(f"{response.status_code}: {response.text}")

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    return events / elapsed, latencies


WRK_SCRIPT = """
counter = 0
local thread_tag = tostring(math.random(1, 1e9))
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local body = string.format(
    '{"event_id":"%s-%s-%d","name":"order_placed","contact":{"email":"c%d@example.com"},'
    .. '"properties":{"total":%d}}', TAG, thread_tag, counter, counter % 500, counter)
  return wrk.format(nil, nil, nil, body)
end
"""

_WRK_RATE = re.compile(r"Requests/sec:\s+([0-9.]+)")
_WRK_LATENCY = re.compile(r"^\s+(50|99)(?:\.000)?%\s+([0-9.]+)(us|ms|s)\s*$", re.M)
_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


async def drive_wrk(
    url: str, path: str, headers: dict[str, str], seconds: int, concurrency: int, tag: str
) -> tuple[float, float, float]:
    """Load from a separate process (wrk), so the client does not share the server's event loop:
    (requests per second, p50 ms, p99 ms)."""
    script = Path(f"/tmp/sweepline-bench-{tag}-{os.getpid()}.lua")
    script.write_text(f'TAG = "{tag}"\n' + WRK_SCRIPT)
    cmd = ["wrk", "-t2", f"-c{concurrency}", f"-d{seconds}s", "--latency", "-s", str(script)]
    for name, value in headers.items():
        cmd += ["-H", f"{name}: {value}"]
    proc = await asyncio.create_subprocess_exec(
        *cmd, url + path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out = (await proc.communicate())[0].decode()
    script.unlink(missing_ok=True)
    if "Non-2xx" in out or (rate := _WRK_RATE.search(out)) is None:
        raise RuntimeError(f"wrk failed:\n{out}")
    lat = {p: float(v) * _UNIT_MS[u] for p, v, u in _WRK_LATENCY.findall(out)}
    return float(rate.group(1)), lat["50"], lat["99"]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def ingestion(db_url: str, args: argparse.Namespace) -> None:
    settings = load_settings(
        {
            "DATABASE_URL": db_url,
            "ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "SESSION_SECRET": uuid.uuid4().hex,
            "SWEEPERS_ENABLED": "false",
            "LOG_LEVEL": "WARNING",
        }
    )
    runtime = assemble(settings, SystemClock())
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
    ws = created.workspace.id

    class Event(msgspec.Struct):
        event_id: str
        name: str
        contact: dict[str, Any]
        properties: dict[str, Any]

    @post("/bare", status_code=202)
    async def bare(request: Request[Any, Any, Any]) -> dict[str, Any]:
        event = msgspec.json.decode(await request.body(), type=Event)
        async with runtime.db.write() as uow:
            stored = await store(
                uow.session,
                workspace_id=ws,
                source="bare",
                name=event.name,
                external_id=event.event_id,
                payload={"contact": event.contact, "properties": event.properties},
                now=datetime.now(UTC),
            )
        return {"stored": stored is not None, "id": stored}

    bare_app = Litestar(route_handlers=[bare], logging_config=None)
    real_app = create_app(settings, runtime, background=False)
    # Both served by uvicorn in this event loop (the database pool lives in it), driven by the
    # same client: the comparison is like for like.
    try:
        async with serve_in_loop(bare_app) as bare_url, serve_in_loop(real_app) as real_url:
            token = {"X-Ingest-Token": created.ingest_token}
            path = "/hooks/funnels/events"
            # Warm both paths (connections, caches) before measuring.
            await drive(bare_url, "/bare", {}, 200, args.concurrency, "warm-bare")
            await drive(real_url, path, token, 200, args.concurrency, "warm-real")
            if shutil.which("wrk"):
                await drive_wrk(bare_url, "/bare", {}, 2, args.concurrency, "warm-bare")
                await drive_wrk(real_url, path, token, 2, args.concurrency, "warm-real")
                base = await drive_wrk(
                    bare_url, "/bare", {}, args.seconds, args.concurrency, "bare"
                )
                real = await drive_wrk(
                    real_url, path, token, args.seconds, args.concurrency, "real"
                )
                client = f"wrk, {args.seconds} s each"
            else:
                base_rate, base_lat = await drive(
                    bare_url, "/bare", {}, args.events, args.concurrency, "bare"
                )
                real_rate, real_lat = await drive(
                    real_url, path, token, args.events, args.concurrency, "real"
                )
                base = (base_rate, pct(base_lat, 0.5), pct(base_lat, 0.99))
                real = (real_rate, pct(real_lat, 0.5), pct(real_lat, 0.99))
                client = f"in-process httpx client, {args.events} events each"
    finally:
        await runtime.aclose()
    print(f"ingestion, {args.concurrency} in flight ({client})")
    for label, (rate, p50, p99) in (("bare endpoint (same insert)", base), ("api_event", real)):
        print(f"  {label:<28} {rate:8.0f} events/s   p50 {p50:6.1f} ms   p99 {p99:6.1f} ms")
    print(f"  ratio {real[0] / base[0]:.2f}x of the bare endpoint")


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
    parser.add_argument("--events", type=int, default=3000, help="without wrk: events per side")
    parser.add_argument("--seconds", type=int, default=10, help="with wrk: seconds per side")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--recipients", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=8)
    args = parser.parse_args()
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    db_url = await create_database(base)
    try:
        await upgrade(db_url)
        await ingestion(db_url, args)
        await campaign(db_url, args)
    finally:
        await drop_database(db_url)


if __name__ == "__main__":
    asyncio.run(main())
