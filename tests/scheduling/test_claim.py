"""The claim primitive (issue 11 item 1), on whichever database the session runs: due rows in
order and at most ``limit``, never two owners at once, an expired lease claimed again, renew and
release, the heartbeat, and several processes claiming while some are SIGKILLed: every item
worked on exactly once."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update

from app.clock import ManualClock
from app.db.dialect import dialect_name
from app.db.session import Database
from app.scheduling.claim import Claim, Lease, LeaseLost
from app.settings import Settings
from tests.conftest import eventually
from tests.scheduling.claim_items import ITEMS, items, metadata, worked

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
async def tables(shared_db: Database) -> AsyncIterator[None]:
    async with shared_db.write_engine.begin() as conn:
        await conn.run_sync(metadata.drop_all)
        await conn.run_sync(metadata.create_all)
    yield
    async with shared_db.write_engine.begin() as conn:
        await conn.run_sync(metadata.drop_all)


async def add_items(db: Database, count: int, *, due: datetime = T0, start: int = 1) -> None:
    rows = [
        {"id": i, "status": "pending", "due_at": due + timedelta(seconds=i % 7)}
        for i in range(start, start + count)
    ]
    async with db.write() as uow:
        for chunk in range(0, len(rows), 500):
            await uow.session.execute(insert(items), rows[chunk : chunk + 500])


async def owners(db: Database) -> dict[int, str | None]:
    async with db.read() as session:
        rows = await session.execute(select(items.c.id, items.c.lease_owner))
        return {int(i): o for i, o in rows.all()}


async def test_claims_due_rows_oldest_first_up_to_the_limit_and_stamps_the_lease(
    shared_db: Database, tables: None
) -> None:
    await add_items(shared_db, 10)
    async with shared_db.write() as uow:
        await uow.session.execute(
            update(items).where(items.c.id == 3).values(due_at=T0 + timedelta(hours=1))
        )
    now = T0 + timedelta(seconds=10)
    first = await ITEMS.take(shared_db, now=now, limit=4, owner="a", lease_seconds=30)
    # due_at = T0 + (id % 7) s, so ids 7, 1, 8, 2 are the oldest; id 3 is not due yet.
    assert sorted(r.id for r in first) == [1, 2, 7, 8]
    assert all(r.attempts == 1 for r in first)
    second = await ITEMS.take(shared_db, now=now, limit=100, owner="b", lease_seconds=30)
    assert sorted(r.id for r in second) == [4, 5, 6, 9, 10], "leased rows are not claimed again"
    held = await owners(shared_db)
    assert {held[i] for i in (1, 2, 7, 8)} == {"a"}
    assert held[3] is None
    async with shared_db.read() as session:
        until = await session.scalar(select(items.c.lease_until).where(items.c.id == 1))
    assert until == now + timedelta(seconds=30)


async def test_an_expired_lease_is_claimed_again_by_another_owner(
    shared_db: Database, tables: None
) -> None:
    await add_items(shared_db, 3)
    now = T0 + timedelta(seconds=10)
    await ITEMS.take(shared_db, now=now, limit=3, owner="dead", lease_seconds=30)
    assert (
        await ITEMS.take(
            shared_db, now=now + timedelta(seconds=29), limit=3, owner="b", lease_seconds=30
        )
        == []
    )
    again = await ITEMS.take(
        shared_db, now=now + timedelta(seconds=31), limit=3, owner="b", lease_seconds=30
    )
    assert sorted((r.id, r.attempts) for r in again) == [(1, 2), (2, 2), (3, 2)]
    assert set((await owners(shared_db)).values()) == {"b"}


async def test_renew_keeps_held_rows_and_reports_finished_or_taken_over_ones(
    shared_db: Database, tables: None
) -> None:
    await add_items(shared_db, 3)
    now = T0 + timedelta(seconds=10)
    await ITEMS.take(shared_db, now=now, limit=3, owner="a", lease_seconds=30)
    async with shared_db.write() as uow:
        await uow.session.execute(update(items).where(items.c.id == 1).values(status="done"))
    later = now + timedelta(seconds=31)  # a's lease ran out; b takes id 2
    async with shared_db.write() as uow:
        await uow.session.execute(
            update(items).where(items.c.id == 2).values(lease_owner="b", lease_until=later)
        )
    kept = await ITEMS.renew(shared_db, [1, 2, 3], owner="a", now=later, lease_seconds=30)
    assert kept == {3}
    async with shared_db.read() as session:
        until = await session.scalar(select(items.c.lease_until).where(items.c.id == 3))
    assert until == later + timedelta(seconds=30)


async def test_release_makes_rows_due_again_at_once(shared_db: Database, tables: None) -> None:
    await add_items(shared_db, 2)
    now = T0 + timedelta(seconds=10)
    await ITEMS.take(shared_db, now=now, limit=2, owner="a", lease_seconds=300)
    assert await ITEMS.release(shared_db, [1, 2], owner="someone else", now=now) == 0
    assert await ITEMS.release(shared_db, [1, 2], owner="a", now=now) == 2
    again = await ITEMS.take(
        shared_db, now=now + timedelta(milliseconds=1), limit=5, owner="b", lease_seconds=30
    )
    assert sorted(r.id for r in again) == [1, 2]


async def test_a_lease_heartbeat_keeps_long_work_owned_and_notices_a_takeover(
    shared_db: Database, tables: None
) -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    await add_items(shared_db, 2)
    rows = await ITEMS.take(shared_db, now=clock.now(), limit=2, owner="a", lease_seconds=30)
    async with Lease(
        ITEMS, shared_db, clock, owner="a", keys=[r.id for r in rows], lease_seconds=30
    ) as lease:
        for _ in range(6):  # three whole leases go by while the work runs
            await _until_sleeping(clock)
            clock.advance(10)
            await _until_renewed(lease)
        assert lease.holds(1)
        assert lease.holds(2)
        stolen = await ITEMS.take(shared_db, now=clock.now(), limit=2, owner="b", lease_seconds=30)
        assert stolen == [], "a renewed lease is not taken over"
        async with shared_db.write() as uow:  # an operator reassigns item 2
            await uow.session.execute(update(items).where(items.c.id == 2).values(lease_owner="b"))
        renewals = lease.renewals
        clock.advance(10)
        await _until_renewed(lease, renewals)
        assert lease.holds(1)
        with pytest.raises(LeaseLost):
            lease.check(2)


async def test_a_lease_whose_renewals_stop_runs_out_on_its_own_clock(
    shared_db: Database, tables: None
) -> None:
    clock = ManualClock(T0)
    lease = Lease(ITEMS, shared_db, clock, owner="a", keys=[1], lease_seconds=30)
    assert lease.holds(1)
    clock.advance(30)
    assert not lease.holds(1), "past the last confirmed expiry the work must stop"


async def _until_sleeping(clock: ManualClock) -> None:
    async def sleeping() -> bool:
        return clock.sleepers > 0

    await eventually(sleeping)  # the heartbeat sleeps on the clock


async def _until_renewed(lease: Lease, before: int | None = None) -> None:
    start = lease.renewals if before is None else before

    async def renewed() -> bool:
        return lease.renewals > start

    await eventually(renewed)


def test_the_statement_is_compiled_once_per_dialect() -> None:
    pg = str(ITEMS.statement("postgresql"))
    assert "= ANY(ARRAY(SELECT id FROM claim_test_items" in pg
    assert "FOR UPDATE OF claim_test_items SKIP LOCKED" in pg
    lite = str(ITEMS.statement("sqlite"))
    assert "id IN (SELECT id FROM claim_test_items" in lite
    assert "FOR UPDATE" not in lite
    assert ITEMS.statement("postgresql") is ITEMS.statement("postgresql")


def test_a_declaration_naming_a_missing_column_is_refused() -> None:
    with pytest.raises(ValueError, match="no column nope"):
        Claim(table=items, due="1 = 1", order_by="id", returning=("nope",))


async def test_concurrent_claimers_never_share_a_row(shared_db: Database, tables: None) -> None:
    await add_items(shared_db, 600)
    now = T0 + timedelta(seconds=10)
    claimed: list[tuple[str, int]] = []

    async def claimer(name: str) -> None:
        rng = random.Random(name)
        while rows := await ITEMS.take(
            shared_db, now=now, limit=rng.randint(1, 30), owner=name, lease_seconds=60
        ):
            claimed.extend((name, r.id) for r in rows)
            await asyncio.sleep(0)

    await asyncio.gather(*(claimer(f"c{i}") for i in range(8)))
    ids = Counter(i for _, i in claimed)
    assert len(ids) == 600
    assert set(ids.values()) == {1}
    if dialect_name(shared_db) == "postgresql":
        assert len({n for n, _ in claimed}) > 1, "the claimers really ran side by side"


async def test_processes_claiming_while_some_are_sigkilled_work_each_item_exactly_once(
    settings: Settings, shared_db: Database, tables: None
) -> None:
    total, kills = 3000, 4
    await add_items(shared_db, total)
    env = {**os.environ, "DATABASE_URL": settings.database.url}
    args = [sys.executable, "-m", "tests.scheduling.claim_proc", "1.5"]

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE)

    async def wait_claimed(proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        while True:
            line = await asyncio.to_thread(proc.stdout.readline)
            if not line or line.startswith(b"claimed"):
                return

    procs = [spawn() for _ in range(3)]
    rng = random.Random(11)
    killed = 0
    try:
        for _ in range(kills):
            victim = procs.pop(rng.randrange(len(procs)))
            await wait_claimed(victim)
            # A random moment of its work to die in: chaos by design, not an ordering.
            await asyncio.sleep(rng.random() * 0.2)
            victim.send_signal(signal.SIGKILL)
            await asyncio.to_thread(victim.wait)
            killed += victim.returncode == -signal.SIGKILL
            procs.append(spawn())
        for proc in procs:
            await asyncio.wait_for(asyncio.to_thread(proc.wait), 120)
            assert proc.returncode == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert killed >= 1, "the test killed a process mid-work"
    async with shared_db.read() as session:
        per_item = Counter((await session.execute(select(worked.c.item_id))).scalars())
        pending = await session.scalar(
            select(func.count()).select_from(items).where(items.c.status != "done")
        )
    assert pending == 0, "no item lost"
    assert len(per_item) == total
    assert [i for i, n in per_item.items() if n > 1] == [], "no item worked on twice"


BY_STATUS = Claim(
    table=items,
    due="due_at <= :now AND lease_owner IS NULL",
    order_by="due_at DESC, id",
    returning=("id", "status"),
    owner="lease_owner",
    expires="lease_until",
    partition="status",
)


async def test_a_partitioned_claim_takes_the_first_values_rows_first_in_one_statement(
    shared_db: Database, tables: None
) -> None:
    await add_items(shared_db, 10)
    async with shared_db.write() as uow:
        await uow.session.execute(update(items).where(items.c.id <= 3).values(status="urgent"))
        await uow.session.execute(update(items).where(items.c.id == 10).values(status="other"))
    now = T0 + timedelta(seconds=10)
    claim: dict[str, Any] = {
        "now": now,
        "owner": "a",
        "lease_seconds": 30,
        "partitions": ["urgent", "pending"],
    }
    async with shared_db.write() as uow:
        first = await BY_STATUS.take_in(uow.session, limit=5, **claim)
    # The urgent rows first (ids 1-3, latest due first), then the pending ones latest due first:
    # due_at = T0 + (id % 7) s, so 6 and 5. Row 10 is in a partition nobody asked for.
    assert sorted(r.id for r in first) == [1, 2, 3, 5, 6]
    async with shared_db.write() as uow:
        second = await BY_STATUS.take_in(uow.session, limit=1, **{**claim, "owner": "b"})
    assert [r.id for r in second] == [4], "rows claimed already are not claimed again"
    with pytest.raises(TypeError):
        BY_STATUS.statement(dialect_name(shared_db.write_engine), partitions=0)
