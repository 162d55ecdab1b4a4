"""A funnels worker as a separate process, for the SIGKILL hard case (run by the tests).

    python -m tests.engines.funnels.runs.worker_process DATABASE_URL SMTP_PORT LEASE_SECONDS [--die-on-advance]

It leases and executes due runs and delivers due effects (four at a time, over persistent SMTP
connections) until no run is active and no effect pending: a run or an effect a dead process
leased is due again only when that lease runs out, and a survivor waits for it rather than for a
length of idle time.
With ``--die-on-advance`` it sends itself SIGKILL at the moment its first batch's advancement
statement reaches the database: after the outbox rows were written in that transaction and before
it commits — the worst moment to die.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from sqlalchemy import event, exists, select

from app.clock import SystemClock
from app.db.session import Database
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import OUTBOX_PENDING, RUN_ACTIVE, OutboxEffect, Run
from app.engines.funnels.outbox.channel import ChannelSender
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import EmailChannel
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.work.runner import Runner
from app.integrations.mail import SmtpPool
from app.settings import DatabaseSettings, FunnelSettings, MailSettings

ADVANCE_STATEMENTS = ("UPDATE FUNNEL_RUNS SET STATUS", "UPDATE FUNNEL_RUNS AS R SET STATUS")


async def work_left(db: Database) -> bool:
    """Whether a run is still active or an effect still pending (due now or once a lease ends)."""
    async with db.read() as s:
        runs = await s.scalar(select(exists().where(Run.status == RUN_ACTIVE)))
        effects = await s.scalar(select(exists().where(OutboxEffect.status == OUTBOX_PENDING)))
    return bool(runs or effects)


async def main(url: str, smtp_port: int, lease_seconds: int, die: bool) -> None:
    db = Database(DatabaseSettings(url=url))
    clock = SystemClock()
    settings = FunnelSettings(lease_seconds=lease_seconds, runner_batch=10, deliver_batch=10)
    if die:

        def die_at(statement: str) -> None:
            if statement.lstrip().upper().startswith(ADVANCE_STATEMENTS):
                os.kill(os.getpid(), signal.SIGKILL)

        def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            die_at(statement)

        # The advancement is the SQL layer's statement (SQLite) or the driver's array form
        # (PostgreSQL): both pass the statement events, so the process dies at either.
        event.listen(db.write_engine.sync_engine, "before_cursor_execute", before)
    mail = MailSettings(smtp_host="127.0.0.1", smtp_port=smtp_port, from_address="w@test.example")
    signing = Tracking("http://sweepline.test", "worker-process-secret")

    async def fixed(workspace_id: int) -> Tracking:
        return signing

    pool = SmtpPool(mail, 4)
    email: ChannelSender = EmailChannel(pool, signing=fixed)
    runner = Runner(db, settings, mail_domain="test.example", executors=EXECUTORS)
    deliverer = Deliverer(
        db,
        settings,
        lambda c: email if c == "email" else None,
        lease_seconds=lease_seconds,
        in_flight=4,
    )
    owner = f"proc-{os.getpid()}"
    while True:
        ran = await runner.run_batch(owner=owner, now=clock.now())
        sent = await deliverer.run_batch(owner=owner, now=clock.now)
        if ran.leased or sent.leased:
            continue
        if not await work_left(db):
            break
        await asyncio.sleep(0.05)  # a worker process polling its queue, as the real one does
    await pool.aclose()
    await db.dispose()


if __name__ == "__main__":
    asyncio.run(
        main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), "--die-on-advance" in sys.argv)
    )
