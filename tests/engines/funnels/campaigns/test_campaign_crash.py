"""FN-28: a campaign of 10,000 recipients whose sender **process** is SIGKILLed mid-send, then
resumed by another sender: every recipient arrives exactly once at a real SMTP server.

The SMTP server (aiosmtpd) is gated: after 4,000 messages it stops answering, so that when the
kill lands several messages are on the wire and not accepted — the ones a resumed sender must send
— while everything accepted before has been confirmed. (A message a server accepted in the instant
before a crash, before its "250" could be recorded, is the one case no SMTP client can close —
RFC 1047; it is resent with the same Message-ID. The gate keeps the test about what the sender can
guarantee: it never skips an unconfirmed recipient and never resends a confirmed one.)
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select

from app.clock import SystemClock
from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.models import DONE, SENDING, Campaign, Recipient
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import Contact
from app.sandbox.smtp import ReceivedMessage, SmtpSink
from app.settings import MailSettings
from tests.conftest import eventually

ROOT = Path(__file__).resolve().parents[4]
AUDIENCE = 10_000
STOP_AFTER = 4_000


MESSAGE_ID = re.compile(rb"^Message-ID:\s*(<[^>]+>)", re.MULTILINE | re.IGNORECASE)


class GatedSink(SmtpSink):
    """An SMTP sink that, after ``stop_after`` messages, holds the next one (and with it the
    server) until released, then refuses everything until reopened. It keeps only the envelope
    and the Message-ID of what it accepts (parsing 10,000 whole messages would be the slowest
    part of the test)."""

    def __init__(self, stop_after: int) -> None:
        super().__init__()
        self.stop_after = stop_after
        self.held = threading.Event()
        self.released = threading.Event()
        self.refusing = False
        self.connections = 0
        """SMTP connections open at the server."""
        self._count_connections()

    def _count_connections(self) -> None:
        build = self._controller.factory

        def counted() -> Any:
            smtp = build()
            made, lost = smtp.connection_made, smtp.connection_lost

            def connection_made(transport: Any) -> None:
                with self._lock:
                    self.connections += 1
                made(transport)

            def connection_lost(exc: BaseException | None) -> None:
                with self._lock:
                    self.connections -= 1
                lost(exc)

            smtp.connection_made, smtp.connection_lost = connection_made, connection_lost
            return smtp

        # aiosmtpd's controller builds each connection's handler with its factory method.
        self._controller.factory = counted  # type: ignore[method-assign]

    def _receive(self, envelope: Any) -> str:
        if self.refusing:
            return "451 Try again later"
        if len(self.messages) >= self.stop_after:
            self.held.set()
            self.released.wait(timeout=60)
            self.refusing = True
            return "451 Try again later"
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
        return "250 Message accepted for delivery"


@pytest.mark.postgres
async def test_fn28_campaign_killed_mid_send_resumes_each_recipient_exactly_once(
    runtime: Any, tenant: Any, database_url: str
) -> None:
    ws = tenant.workspace_id
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": ws,
                    "email": f"r{i:05d}@example.com",
                    "first_name": f"R{i}",
                    "last_name": "",
                    "timezone": "UTC",
                    "fields": {},
                    "consent": {},
                    "suppressed": {},
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(AUDIENCE)
            ],
        )
        campaign = await create_campaign(
            uow.session,
            ws,
            CampaignData(
                name="Big", subject="Hi {{first_name}}", body="News", rate_per_minute=100_000
            ),
            now,
        )
        campaign_id = campaign.id
    async with runtime.db.write() as uow:
        assert await materialise(uow.session, campaign_id, now) == AUDIENCE

    async def sent() -> int:
        async with runtime.db.read() as s:
            return int(
                await s.scalar(
                    select(func.count())
                    .select_from(Recipient)
                    .where(Recipient.campaign_id == campaign_id, Recipient.status == "sent")
                )
                or 0
            )

    sink = GatedSink(STOP_AFTER)
    sink.start()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests/engines/funnels/campaigns/campaign_proc.py"),
                database_url,
                str(campaign_id),
                sink.host,
                str(sink.port),
                "doomed-sender",
                "2",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            await eventually(lambda: asyncio.to_thread(sink.held.is_set), timeout=120)
            # Everything the server accepted has been confirmed; the rest is on the wire.
            await eventually(lambda: _equal(sent, len(sink.snapshot())), timeout=30)
            proc.kill()
            assert proc.wait(timeout=30) == -9
        finally:
            if proc.poll() is None:
                proc.kill()
        sink.released.set()
        # The server drains the dead process's connections, refusing what they had on the
        # wire, before it opens again.
        await eventually(lambda: _true(sink.refusing and sink.connections == 0), timeout=60)
        sink.stop_after = AUDIENCE * 2  # open again, for good
        sink.refusing = False
        assert len(sink.snapshot()) == STOP_AFTER
        assert await sent() == STOP_AFTER
        async with runtime.db.read() as s:
            row = await s.get(Campaign, campaign_id)
            assert row is not None
            assert row.status == SENDING
            assert row.checkpoint <= STOP_AFTER

        # Another sender takes over once the dead one's lease has expired.
        mail = MailSettings(
            smtp_host=sink.host,
            smtp_port=sink.port,
            from_address="news@test.example",
            timeout_seconds=30,
        )
        pool = SmtpPool(mail, 8)
        sender = CampaignSender(
            runtime.db,
            pool,
            owner="resumer",
            domain="test.example",
            in_flight=8,
            signing=Tracking("http://sweepline.test", "campaign-test-secret"),
        )
        # The dead sender's lease (2 s, real time) runs out: nothing signals it but time.
        await asyncio.sleep(2.1)
        try:
            assert await send_until_done(sender, campaign_id, SystemClock()) is True
        finally:
            await pool.aclose()
        counts = sink.count_by_message_id()
        assert len(counts) == AUDIENCE
        assert set(counts.values()) == {1}
        assert await sent() == AUDIENCE
        async with runtime.db.read() as s:
            row = await s.get(Campaign, campaign_id)
            assert row is not None
            assert row.status == DONE
            assert row.checkpoint == AUDIENCE
    finally:
        sink.released.set()
        sink.stop()


async def _equal(left: Any, right: int) -> bool:
    return await left() == right


async def _true(value: bool) -> bool:
    return value
