"""A campaign sender in its own process (the crash test SIGKILLs it mid-send).

Usage: python tests/engines/funnels/campaigns/campaign_proc.py <database url> <campaign id> <smtp host>
<smtp port> <owner> <lease seconds>
"""

from __future__ import annotations

import asyncio
import sys

from app.clock import SystemClock
from app.db.session import Database
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.events.tracking import Tracking
from app.settings import MailSettings, load_settings


async def main(url: str, campaign_id: int, host: str, port: int, owner: str, lease: int) -> int:
    db = Database(load_settings({"DATABASE_URL": url}).database)
    pool = SmtpPool(
        MailSettings(
            smtp_host=host, smtp_port=port, from_address="news@test.example", timeout_seconds=60
        ),
        8,
    )
    sender = CampaignSender(
        db,
        pool,
        owner=owner,
        domain="test.example",
        in_flight=8,
        lease_seconds=lease,
        signing=Tracking("http://sweepline.test", "campaign-test-secret"),
    )
    try:
        finished = await send_until_done(sender, campaign_id, SystemClock())
    finally:
        await pool.aclose()
        await db.dispose()
    return 0 if finished else 3


if __name__ == "__main__":
    url, campaign, host, port, owner, lease = sys.argv[1:7]
    sys.exit(asyncio.run(main(url, int(campaign), host, int(port), owner, int(lease))))
