"""The hourly sweep admits due schedules in chunks (RT-22, RT-30): one transaction per chunk, every
schedule's two-device group still all-or-nothing, the balance shared in due order, and the same
outcomes and traces as admitting each schedule alone."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from app.engines.ranktracking.claim.admission import MANUAL, RECURRING, admit
from app.engines.ranktracking.claim.dispatch import dispatch_due, plan_lanes
from app.engines.ranktracking.claim.handoff import admit_batch_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.lists import get_list, remove_keywords
from app.engines.ranktracking.models import ACTIVE_RUN_STATUSES, LedgerEntry, Run, Schedule
from app.runtime import Runtime
from tests.engines.ranktracking.factories import (
    available,
    fund,
    fund_micros,
    make_list,
    make_schedule,
)
from tests.factories import Tenant

KEYWORDS = [f"k{j}" for j in range(100)]
ONE_DEVICE = 51_600  # 100 keywords × 0.0006 USD × 0.86 EUR/USD, in micro-euros
"""100 keywords at top 10: 6 cents a device."""


async def _make_due(runtime: Runtime, schedule_ids: list[int]) -> None:
    """Due in creation order (the first created is the oldest due)."""
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        for n, schedule_id in enumerate(schedule_ids):
            await uow.session.execute(
                update(Schedule)
                .where(Schedule.id == schedule_id)
                .values(next_due_at=now - timedelta(minutes=60 - n))
            )


async def _runs(runtime: Runtime, schedule_id: int) -> list[Run]:
    async with runtime.db.read() as session:
        rows = await session.execute(
            select(Run).where(Run.schedule_id == schedule_id).order_by(Run.id)
        )
        return list(rows.scalars())


def test_rt30_lanes_never_share_an_organisation() -> None:
    due = [(1, 10), (2, 20), (3, 10), (4, 30), (5, 10), (6, 20), (7, 40), (8, 10)]
    lanes = plan_lanes(due, chunk=3)
    orgs = dict(due)
    seen: list[set[int]] = [{orgs[i] for chunk in lane for i in chunk} for lane in lanes]
    for a in range(len(seen)):
        for b in range(a + 1, len(seen)):
            assert not seen[a] & seen[b], lanes
    chunks = [chunk for lane in lanes for chunk in lane]
    assert all(len(chunk) <= 3 for chunk in chunks)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(1, 9))
    # The large organisation's lane keeps its schedules in due order, chunk after chunk.
    assert [[1, 3, 5], [8]] in lanes


async def test_rt22_batch_keeps_every_group_all_or_nothing_in_due_order(
    runtime: Runtime, tenant: Tenant
) -> None:
    """One chunk, one balance: the oldest two-device group takes two device reservations, the
    next group finds one left — its desktop part would fit, so nothing of it is written — and a
    later single-device schedule still gets the reservation the refused group did not take."""
    both = ["desktop", "mobile"]
    first = await make_schedule(runtime, tenant, name="a", keywords=KEYWORDS, devices=both)
    second = await make_schedule(runtime, tenant, name="b", keywords=KEYWORDS, devices=both)
    third = await make_schedule(runtime, tenant, name="c", keywords=KEYWORDS)
    ids = [first.id, second.id, third.id]
    await _make_due(runtime, ids)
    await fund_micros(runtime, tenant, 3 * ONE_DEVICE)
    report = await dispatch_due(RankTrackingDeps.of(runtime), runtime.clock.now())
    assert report.selected == 3
    assert report.outcomes == {"launched": 2, "balance": 1}
    assert report.launched_runs == 3
    assert [r.status for r in await _runs(runtime, first.id)] == ["dispatching"] * 2
    refused = await _runs(runtime, second.id)
    assert [(r.status, r.error_code, r.reservation_state) for r in refused] == [
        ("skipped_balance", "insufficient_balance", "none")
    ] * 2
    assert [r.status for r in await _runs(runtime, third.id)] == ["dispatching"]
    assert await available(runtime, tenant) == 0
    async with runtime.db.read() as session:
        held = await session.scalar(
            select(func.count()).select_from(LedgerEntry).where(LedgerEntry.kind == "reservation")
        )
    assert held == 3


async def test_rt32_batch_outcomes_match_single_admissions(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Paused, busy, memberless and admitted schedules in one chunk each get the outcome and the
    trace they get alone; the one with an active run leaves its row and retries in an hour."""
    await fund(runtime, tenant, 1000)
    paused = await make_schedule(runtime, tenant, name="paused", keywords=["a"])
    busy = await make_schedule(runtime, tenant, name="busy", keywords=["b"])
    kl = await make_list(runtime, tenant, ["c"])
    empty = await make_schedule(runtime, tenant, name="empty", list_id=kl.id)
    fine = await make_schedule(runtime, tenant, name="fine", keywords=["d", "e"])
    async with runtime.db.write() as uow:
        await admit(
            uow, RankTrackingDeps.of(runtime), busy.id, trigger=MANUAL, now=runtime.clock.now()
        )
        await uow.session.execute(
            update(Schedule).where(Schedule.id == paused.id).values(status="paused_user")
        )
        await remove_keywords(
            uow.session,
            await get_list(uow.session, tenant.workspace_id, kl.id),
            ["c"],
            now=runtime.clock.now(),
        )
    ids = [paused.id, busy.id, empty.id, fine.id, 10**9]
    await _make_due(runtime, ids[:4])
    launches = await admit_batch_and_send(
        RankTrackingDeps.of(runtime),
        ids,
        trigger=RECURRING,
        queue="standard",
        now=runtime.clock.now(),
    )
    assert [(x.schedule_id, x.reason, x.code) for x in launches] == [
        (paused.id, "paused", "schedule_paused"),
        (busy.id, "active_run", "run_active"),
        (empty.id, "members", "members_empty"),
        (fine.id, None, None),
        (10**9, "archived", "schedule_missing"),
    ]
    assert launches[3].launched == 1
    assert launches[3].request_id is not None
    assert await _runs(runtime, paused.id) == []
    busy_runs = await _runs(runtime, busy.id)
    assert [r.status for r in busy_runs] == ["dispatching", "skipped_dispatch"]
    assert [(r.status, r.error_code) for r in await _runs(runtime, empty.id)] == [
        ("failed", "members_empty")
    ]
    (run,) = await _runs(runtime, fine.id)
    assert (run.status, run.keywords, run.reservation_state) == (
        "dispatching",
        ["d", "e"],
        "held",
    )
    async with runtime.db.read() as session:
        row = await session.get(Schedule, busy.id)
        assert row is not None
        assert row.retrying
        # RT-52: the dispatch sweep's next :20 slot at least an hour away (09:00 → 10:20).
        assert row.next_due_at == runtime.clock.now() + timedelta(hours=1, minutes=20)


@pytest.mark.postgres
async def test_rt22_sweep_and_manual_requests_at_once_never_overdraw(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The sweep's chunk and twelve manual requests on the same schedules race for a balance
    that covers ten runs: exactly ten are admitted, no schedule gets two active runs, and the
    balance never goes below zero."""
    ids = [
        (await make_schedule(runtime, tenant, name=f"s{i}", keywords=KEYWORDS)).id
        for i in range(24)
    ]
    await _make_due(runtime, ids)
    await fund_micros(runtime, tenant, 10 * ONE_DEVICE)

    async def manual(schedule_id: int) -> int:
        async with runtime.db.write() as uow:
            launch = await admit(
                uow,
                RankTrackingDeps.of(runtime),
                schedule_id,
                trigger=MANUAL,
                now=runtime.clock.now(),
            )
        return launch.launched

    results: list[Any] = await asyncio.gather(
        dispatch_due(RankTrackingDeps.of(runtime), runtime.clock.now()),
        *(manual(i) for i in ids[:12]),
    )
    sweep, *manuals = results
    assert sweep.errors == 0
    assert sweep.launched_runs + sum(manuals) == 10
    assert await available(runtime, tenant) == 0
    async with runtime.db.read() as session:
        per_schedule = (
            await session.execute(
                select(Run.schedule_id, func.count())
                .where(Run.status.in_(ACTIVE_RUN_STATUSES))
                .group_by(Run.schedule_id)
            )
        ).all()
        reserved = await session.scalar(
            select(func.sum(LedgerEntry.amount_micros)).where(LedgerEntry.kind == "reservation")
        )
    assert len(per_schedule) == 10
    assert {n for _, n in per_schedule} == {1}
    assert reserved == 10 * ONE_DEVICE
