"""A claimer process for the claim primitive's SIGKILL test: ``python -m
tests.scheduling.claim_proc LEASE_SECONDS``.

It claims batches of items with :data:`~tests.scheduling.claim_items.ITEMS` and works on each one
in a unit of work that records the work and finishes the item only while this process still owns
it — the pattern every engine follows. It prints ``ready``, then ``claimed N`` per batch, and exits
when nothing is left to claim or lease.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from sqlalchemy import func, insert, select, update

from app.clock import SystemClock
from app.db.dialect import row_count
from app.db.session import Database
from app.settings import load_settings
from tests.scheduling.claim_items import ITEMS, items, worked


async def main(lease_seconds: float) -> None:
    db = Database(load_settings(os.environ).database)
    clock = SystemClock()
    owner = f"claimer-{os.getpid()}"
    rng = random.Random(os.getpid())
    await db.ping()
    print("ready", flush=True)
    try:
        while True:
            rows = await ITEMS.take(
                db,
                now=clock.now(),
                limit=rng.randint(1, 25),
                owner=owner,
                lease_seconds=lease_seconds,
            )
            if not rows:
                async with db.read() as session:
                    left = await session.scalar(
                        select(func.count()).where(items.c.status == "pending")
                    )
                if not left:
                    return
                await asyncio.sleep(0.05)  # the rest is leased by someone (maybe dead)
                continue
            print(f"claimed {len(rows)}", flush=True)
            for item_id, _attempts in rows:
                await asyncio.sleep(rng.random() * 0.004)  # random work time: interleavings vary
                async with db.write() as uow:
                    done = await uow.session.execute(
                        update(items)
                        .where(
                            items.c.id == item_id,
                            items.c.lease_owner == owner,
                            items.c.status == "pending",
                        )
                        .values(status="done", lease_owner=None, lease_until=None)
                    )
                    if row_count(done):
                        await uow.session.execute(
                            insert(worked).values(item_id=item_id, owner=owner)
                        )
    finally:
        await db.dispose()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1])))
