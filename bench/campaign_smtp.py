"""Campaign sending beside raw SMTP sends of the same messages to the same server, same run.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
        .venv/bin/python bench/campaign_smtp.py [--messages 3000] [--in-flight 8] [--rounds 3]

It creates its own PostgreSQL database (dropped at the end) and starts the counting SMTP server
(aiosmtpd in its own process, ``bench/mail_sink.py``). Each round measures, one after the other:

* **raw SMTP**: ``--in-flight`` aiosmtplib connections sending the campaign's own messages
  (composed as the sender composes them — rendered, unsubscribe links and headers — and turned
  into bytes before the clock starts), ``sendmail`` one after the other on each connection: no
  database, no rendering, the server's and the SMTP client's ceiling;
* **campaign**: a campaign of as many recipients sent by the campaign sender (snapshot taken
  before the clock starts; suppression checked at send time, rendering, ``--in-flight``
  persistent connections, every outcome committed before its slot sends again), as
  ``bench/funnels_deliver.py`` measures it.

Printed: both rates per round, then the medians and the ratio campaign / raw.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import aiosmtplib  # noqa: E402
from funnels_deliver import (  # noqa: E402
    SIGNING,
    campaign_rate,
    create_database,
    drop_database,
)
from mail_sink import Sink  # noqa: E402

from app import event_loop  # noqa: E402
from app.db.migrate import upgrade  # noqa: E402
from app.db.session import Database  # noqa: E402
from app.engines.funnels.campaigns.due.recipients import row_of  # noqa: E402
from app.engines.funnels.campaigns.models import Campaign  # noqa: E402
from app.engines.funnels.campaigns.work.compose import compose  # noqa: E402
from app.engines.funnels.models import Contact  # noqa: E402
from app.integrations.mail.message import build_message  # noqa: E402
from app.integrations.mail.wire import render  # noqa: E402
from app.settings import DatabaseSettings, MailSettings  # noqa: E402

SENDER = "news@bench.test"


def messages(n: int, tag: str) -> list[tuple[str, bytes]]:
    """The campaign's messages to ``n`` recipients as the sender composes them, as bytes."""
    campaign = Campaign(
        id=1,
        workspace_id=1,
        subject="Hello {{first_name}}",
        body="Hello,\n\nthe news of the week: https://example.com/news\n",
        html=None,
        preheader="",
        topic=None,
        transactional=False,
    )
    out = []
    for i in range(n):
        contact = Contact(id=i + 1, email=f"{tag}{i}@bench.test", first_name=f"C{i}", fields={})
        email = compose(
            campaign, row_of(contact, i + 1), domain=tag, tracking=None, signing=SIGNING
        )
        out.append((email.to[0], render(build_message(email, sender=SENDER))))
    return out


async def raw_rate(port: int, n: int, in_flight: int, sink: Sink, tag: str) -> float:
    todo = messages(n, tag)
    clients = [aiosmtplib.SMTP(hostname="127.0.0.1", port=port) for _ in range(in_flight)]
    for client in clients:
        await client.connect()
    queue = iter(todo)

    async def connection(client: aiosmtplib.SMTP) -> None:
        for to, raw in queue:  # shared by the connections: each message is sent once
            await client.sendmail(SENDER, [to], raw, mail_options=["BODY=8BITMIME"])

    began = time.perf_counter()
    await asyncio.gather(*(connection(c) for c in clients))
    elapsed = time.perf_counter() - began
    for client in clients:
        await client.quit()
    got = sink.take()
    assert (got.total, got.distinct) == (n, n), (got, n)
    return n / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=3_000)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    url = await create_database(base)
    sink = Sink()
    raw: list[float] = []
    sent: list[float] = []
    try:
        await upgrade(url)
        db = Database(DatabaseSettings(url=url, pool_size=args.in_flight + 4))
        mail = MailSettings(
            smtp_host="127.0.0.1", smtp_port=sink.port, from_address=SENDER, timeout_seconds=30
        )
        n, k = args.messages, args.in_flight
        print(f"PostgreSQL, {n:,} messages, {k} connections, aiosmtpd on loopback (own process)")
        for round_ in range(args.rounds):
            raw.append(await raw_rate(sink.port, n, k, sink, f"raw{round_}"))
            sent.append(await campaign_rate(db, mail, n, k, sink))
            print(f"  round {round_ + 1}: raw SMTP {raw[-1]:,.0f} msg/s, campaign {sent[-1]:,.0f}")
        await db.dispose()
    finally:
        sink.stop()
        await drop_database(url)
    r, c = statistics.median(raw), statistics.median(sent)
    print(f"raw SMTP {r:,.0f} msg/s, campaign {c:,.0f} msg/s, ratio {c / r:.2f}x (medians)")


if __name__ == "__main__":
    # The loop the worker process runs on, so the figures are the deployed ones.
    event_loop.run(main())
