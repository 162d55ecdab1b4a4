"""Geo-grid scans end to end against the provider simulator (RT-122..RT-124): cells posted
with their ``location_coordinate``, ranks read per cell, the cost reserved from the balance like
any run and settled against the billed tasks to the micro-euro, and posted exactly once
however many callers race."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from sqlalchemy import func, select, update

from app.engines.ranktracking import ledger
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.local.models import GeoGridCell
from app.engines.ranktracking.local.posting import post_scan
from app.engines.ranktracking.models import Activity, LedgerEntry
from app.engines.ranktracking.pricing import PriceList
from app.runtime import Runtime
from app.sandbox.serp import SerpPrices, SerpSimulator
from tests.engines.ranktracking.factories import available_micros, fund, fund_micros
from tests.engines.ranktracking.local.helpers import (
    finish,
    load,
    place,
    run,
    scan_in,
    start,
)
from tests.factories import Tenant


def _unit(runtime: Runtime) -> int:
    return PriceList.from_settings(runtime.settings.ranktracking).maps_micros(1, queue="standard")


async def _entries(runtime: Runtime, tenant: Tenant) -> list[tuple[str, int]]:
    async with runtime.db.read() as session:
        rows = await ledger.entries(session, tenant.organisation_id, limit=50)
    return [(e.kind, e.amount_micros) for e in reversed(rows)]


async def test_rt122_each_cell_has_the_business_rank_and_its_competitors(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-122: a 5×5 Local Finder grid: the centre cell is the business's own rank, corners
    lower, each cell with the first three other listings; a business ranked nowhere near a far
    cell is "not in the top 20" (found, rank None)."""
    place(sim, 2)
    await fund(runtime, tenant, 100)
    scan_id = await run(runtime, tenant, scan_in(size=5, engine="local_finder"))
    scan, cells = await load(runtime, scan_id)
    assert scan.status == "done"
    assert [c.state for c in cells] == ["found"] * 25
    assert cells[12].rank == 2
    assert (cells[12].row, cells[12].col) == (2, 2)
    assert cells[0].rank == 5
    assert cells[7].rank == 3
    assert len(cells[12].competitors or []) == 3
    assert all(c["title"] != "Boulangerie Acme" for c in cells[12].competitors or [])
    assert sim.count("local_finder.task_post") == 1

    place(sim, 19)
    far = await run(runtime, tenant, scan_in(size=3, spacing_m=1000))
    _, far_cells = await load(runtime, far)
    assert far_cells[4].rank == 19
    assert [c.state for c in far_cells].count("absent") == 8
    assert all(c.rank is None for c in far_cells if c.state == "absent")


async def test_rt123_reserved_then_settled_to_the_micro_euro(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-123: a 3×3 scan reserves 9 × the SERP price; one cell the provider refuses is not
    billed and not charged: the settlement is 8 × the price, the reservation's rest released,
    the balance down by exactly what the provider billed (no reconciliation entry)."""
    place(sim, 1)
    unit = _unit(runtime)
    await fund_micros(runtime, tenant, 1_000_000)
    scan_id = await start(runtime, tenant, scan_in())
    assert await available_micros(runtime, tenant) == 1_000_000 - 9 * unit
    async with runtime.db.write() as uow:  # a cell the provider will refuse (40501)
        await uow.session.execute(
            update(GeoGridCell)
            .where(GeoGridCell.geogrid_id == scan_id, GeoGridCell.row == 0, GeoGridCell.col == 0)
            .values(location_coordinate="48.9,2.3")
        )
    assert await post_scan(RankTrackingDeps.of(runtime), scan_id)
    await finish(runtime, scan_id)
    scan, cells = await load(runtime, scan_id)
    assert scan.status == "done"
    assert cells[0].state == "failed"
    assert not cells[0].task_id
    billed = PriceList.from_settings(runtime.settings.ranktracking).provider_micros(sim.total_cost)
    assert billed == 8 * unit
    assert (scan.reserved_micros, scan.settled_micros) == (9 * unit, 8 * unit)
    assert await _entries(runtime, tenant) == [
        ("topup", 1_000_000),
        ("reservation", 9 * unit),
        ("settlement", 8 * unit),
        ("release", unit),
    ]
    assert await available_micros(runtime, tenant) == 1_000_000 - billed


async def test_rt123_nothing_posted_releases_everything(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-123: when the provider refuses the whole call the scan fails with its reason and the
    reservation comes back whole."""
    await fund(runtime, tenant, 100)
    before = await available_micros(runtime, tenant)
    scan_id = await start(runtime, tenant, scan_in())
    sim.inject_status("maps.task_post", 40200)
    assert await post_scan(RankTrackingDeps.of(runtime), scan_id)
    scan, cells = await load(runtime, scan_id)
    assert scan.status == "failed"
    assert scan.error_message
    assert {c.state for c in cells} == {"failed"}
    assert scan.reservation_state == "released"
    assert await available_micros(runtime, tenant) == before
    await finish(runtime, scan_id)  # the sweep leaves it alone: no second release
    assert [k for k, _ in await _entries(runtime, tenant)] == ["topup", "reservation", "release"]


async def test_rt124_concurrent_run_now_posts_once(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-124: ten callers racing to post the same scan: one wins, one ``task_post`` call, nine
    tasks created and billed once; a later retry posts nothing."""
    place(sim, 3)
    await fund(runtime, tenant, 100)
    scan_id = await start(runtime, tenant, scan_in())
    deps = RankTrackingDeps.of(runtime)
    won = await asyncio.gather(*(post_scan(deps, scan_id) for _ in range(10)))
    assert won.count(True) == 1
    assert not await post_scan(deps, scan_id)
    assert sim.count("maps.task_post") == 1
    assert sim.tasks_posted == 9
    await finish(runtime, scan_id)
    async with runtime.db.read() as session:
        settlements = await session.scalar(
            select(func.count()).where(LedgerEntry.kind == "settlement")
        )
    assert settlements == 1
    scan, _ = await load(runtime, scan_id)
    assert scan.settled_micros == 9 * _unit(runtime)


async def test_rt123_a_provider_price_drift_is_reported(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-123: matching prices raise nothing; a provider billing 0.0007 USD a search against a
    list of 0.0006 leaves one feed row naming the drift, and the gap above the charge is a
    reconciliation entry, never charged."""
    place(sim, 1)
    await fund(runtime, tenant, 100)
    await run(runtime, tenant, scan_in())
    async with runtime.db.read() as session:
        assert not list(await session.scalars(select(Activity.code)))
    sim.prices = SerpPrices(maps_standard=Decimal("0.0007"))
    scan_id = await run(runtime, tenant, scan_in())
    async with runtime.db.read() as session:
        rows = list(await session.execute(select(Activity.code, Activity.message)))
    assert [code for code, _ in rows] == ["provider_price_above_list"]
    assert f"Geo-grid {scan_id}" in rows[0][1]
    assert "0.0007 USD per search" in rows[0][1]
    kinds = [k for k, _ in await _entries(runtime, tenant)]
    assert kinds[-3:] == ["reservation", "settlement", "reconcile"]
