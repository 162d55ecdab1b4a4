"""Admission is atomic under concurrency (RT-22): never more admitted than the balance holds."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from app.engines.ranktracking.claim.admission import MANUAL, admit
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import LedgerEntry
from app.runtime import Runtime
from tests.engines.ranktracking.factories import available, fund_micros, make_schedule
from tests.factories import Tenant

ONE_RUN = 51_600  # 100 keywords × 0.0006 USD × 0.86 EUR/USD, in micro-euros


async def _admit_all(runtime: Runtime, schedule_ids: list[int]) -> list[int]:
    async def one(schedule_id: int) -> int:
        # Each admission in its own unit of work (its own connection and transaction).
        async with runtime.db.write() as uow:
            launch = await admit(
                uow,
                RankTrackingDeps.of(runtime),
                schedule_id,
                trigger=MANUAL,
                now=runtime.clock.now(),
            )
        return launch.launched

    return await asyncio.gather(*(one(i) for i in schedule_ids))


@pytest.mark.postgres
async def test_rt22_twenty_concurrent_admissions_against_a_balance_for_five(
    runtime: Runtime, tenant: Tenant
) -> None:
    ids = [
        (
            await make_schedule(
                runtime, tenant, name=f"s{i}", keywords=[f"k{j}" for j in range(100)]
            )
        ).id
        for i in range(20)
    ]
    await fund_micros(runtime, tenant, 5 * ONE_RUN)
    launched = await _admit_all(runtime, ids)
    assert sum(launched) == 5
    assert await available(runtime, tenant) == 0
    async with runtime.db.read() as session:
        reserved = await session.scalar(
            select(func.sum(LedgerEntry.amount_micros)).where(LedgerEntry.kind == "reservation")
        )
    assert reserved == 5 * ONE_RUN


async def test_rt22_concurrent_admissions_on_the_embedded_database(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The same claim on whichever database runs the suite (SQLite serialises writers)."""
    ids = [
        (
            await make_schedule(
                runtime, tenant, name=f"s{i}", keywords=[f"k{j}" for j in range(100)]
            )
        ).id
        for i in range(8)
    ]
    await fund_micros(runtime, tenant, 3 * ONE_RUN)
    launched = await _admit_all(runtime, ids)
    assert sum(launched) == 3
    assert await available(runtime, tenant) == 0
