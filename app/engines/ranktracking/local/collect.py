"""Collecting geo-grid cells and settling their scan (RT-122, RT-123).

A sweep every 10 seconds reads each posted cell with ``task_get/advanced`` (Maps or Local
Finder) — a grid is at most 81 tasks, read through the same paced client as every other call —
and writes the business's rank (or "not in the top 20") and the first listings. A task still in
the queue is asked again next tick; an unreadable answer counts an attempt and after
``FETCH_ATTEMPTS`` the cell fails. A scan whose cells have all been read (or given up,
``STALE_AFTER`` after posting) is settled against what the provider billed, once. A scan still
``reserved`` (its request ended between the commit and the post, or the demo seeded it) is
posted here, through the same exactly-once claim as a request's.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import select, update

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.local.business import Business, find_business
from app.engines.ranktracking.local.drift import record_drift
from app.engines.ranktracking.local.models import (
    CELL_ABSENT,
    CELL_FAILED,
    CELL_FOUND,
    CELL_NEW,
    CELL_POSTED,
    CELLS,
    COLLECTING,
    DONE,
    LOCAL_FINDER,
    POSTING,
    RESERVED,
    SCANS,
    GeoGrid,
    GeoGridCell,
)
from app.engines.ranktracking.local.money import settle_scan
from app.engines.ranktracking.local.posting import post_scan
from app.engines.ranktracking.local.scans import estimate_micros
from app.engines.ranktracking.pricing import PriceList
from app.integrations.serp import MapsTaskResult, ProviderError, SerpClient
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep

log = logging.getLogger(__name__)

FETCH_ATTEMPTS = 5
STALE_AFTER = timedelta(hours=1)
"""The provider's guaranteed turnaround is 45 minutes; a task not delivered by then is given
up (it stays billed: it was created)."""
POSTING_LOST_AFTER = timedelta(minutes=15)
"""A scan left ``posting`` this long lost its poster (a crash between the claim and the
answer): its unconfirmed cells are failed so that the scan can settle."""
COMPETITORS = 3
FETCH_CONCURRENCY = 8


async def collect_ready(deps: RankTrackingDeps, client: SerpClient) -> int:
    """One pass over every scan with work outstanding; returns the cells read."""
    now = deps.clock.now()
    async with deps.db.read() as session:
        scans = list(
            (
                await session.execute(
                    select(GeoGrid).where(GeoGrid.status.in_((RESERVED, POSTING, COLLECTING)))
                )
            ).scalars()
        )
    read = 0
    for scan in scans:
        if scan.status == RESERVED:
            await post_scan(deps, scan.id, client)
            continue
        if scan.status == POSTING:
            if scan.updated_at + POSTING_LOST_AFTER <= now:
                await _give_up(deps, scan.id, (CELL_NEW,), "the post was never confirmed")
                await _settle_if_complete(deps, scan.id)
            continue
        read += await collect_scan(deps, client, scan)
        if scan.posted_at is not None and scan.posted_at + STALE_AFTER <= now:
            await _give_up(deps, scan.id, (CELL_POSTED,), "not delivered within an hour")
        await _settle_if_complete(deps, scan.id)
    return read


async def collect_scan(deps: RankTrackingDeps, client: SerpClient, scan: GeoGrid) -> int:
    """Read the scan's posted cells once each; returns how many were read."""
    async with deps.db.read() as session:
        cells = list(
            (
                await session.execute(
                    select(GeoGridCell).where(
                        GeoGridCell.geogrid_id == scan.id, GeoGridCell.state == CELL_POSTED
                    )
                )
            ).scalars()
        )
    business = Business(
        place_id=scan.place_id, cid=scan.cid, domain=scan.domain, name=scan.business_name
    )
    limit = asyncio.Semaphore(FETCH_CONCURRENCY)

    async def one(cell: GeoGridCell) -> bool:
        async with limit:
            return await _read_cell(deps, client, scan.engine, business, cell)

    done = await asyncio.gather(*(one(cell) for cell in cells))
    return sum(done)


async def _read_cell(
    deps: RankTrackingDeps, client: SerpClient, engine: str, business: Business, cell: GeoGridCell
) -> bool:
    task_id = cell.task_id or ""
    try:
        if engine == LOCAL_FINDER:
            result = await client.get_local_finder_task(task_id)
        else:
            result = await client.get_maps_task(task_id)
    except ProviderError as exc:
        await _count_attempt(deps, cell, exc.message)
        return False
    if result.state == "in_queue":
        return False
    if result.state == "error":
        await _count_attempt(deps, cell, result.status_message or "the provider failed the task")
        return False
    await _write_cell(deps, cell.id, result, business)
    return True


async def _write_cell(
    deps: RankTrackingDeps, cell_id: int, result: MapsTaskResult, business: Business
) -> None:
    listing = find_business(result.listings, business)
    competitors = [
        {"rank": x.rank_group, "title": x.title, "domain": x.domain}
        for x in result.listings
        if listing is None or x.rank_absolute != listing.rank_absolute
    ][:COMPETITORS]
    async with deps.db.write() as uow:
        await uow.session.execute(
            CELLS.transition(
                update(GeoGridCell).where(GeoGridCell.id == cell_id),
                CELL_FOUND if listing is not None else CELL_ABSENT,
                from_=(CELL_POSTED,),
            ).values(
                rank=listing.rank_group if listing is not None else None,
                competitors=competitors,
                fetched_at=deps.clock.now(),
            )
        )


async def _count_attempt(deps: RankTrackingDeps, cell: GeoGridCell, message: str) -> None:
    stmt = update(GeoGridCell).where(GeoGridCell.id == cell.id)
    if cell.fetch_attempts + 1 >= FETCH_ATTEMPTS:
        stmt = CELLS.transition(stmt, CELL_FAILED, from_=(CELL_POSTED,))
    else:
        # Still posted: asked again next tick.
        stmt = stmt.where(GeoGridCell.state == CELL_POSTED)
    async with deps.db.write() as uow:
        await uow.session.execute(
            stmt.values(fetch_attempts=GeoGridCell.fetch_attempts + 1, error_message=message[:500])
        )


async def _give_up(
    deps: RankTrackingDeps, scan_id: int, states: tuple[str, ...], message: str
) -> None:
    async with deps.db.write() as uow:
        await uow.session.execute(
            CELLS.transition(
                update(GeoGridCell).where(GeoGridCell.geogrid_id == scan_id),
                CELL_FAILED,
                from_=states,
            ).values(error_message=message)
        )


async def _settle_if_complete(deps: RankTrackingDeps, scan_id: int) -> None:
    """Settle the scan once no cell waits: charged per created task (billed by the provider
    when it was created), at the estimate's price; the provider's reported cost beside it."""
    prices = PriceList.from_settings(deps.settings.ranktracking)
    now = deps.clock.now()
    async with deps.db.write() as uow:
        session = uow.session
        scan = (
            await session.execute(select(GeoGrid).where(GeoGrid.id == scan_id).with_for_update())
        ).scalar_one()
        if scan.status not in (COLLECTING, POSTING):
            return
        cells = list(
            (
                await session.execute(select(GeoGridCell).where(GeoGridCell.geogrid_id == scan_id))
            ).scalars()
        )
        if any(c.state in (CELL_NEW, CELL_POSTED) for c in cells):
            return
        billed = [c for c in cells if c.task_id]
        cost = sum((c.cost or Decimal(0) for c in billed), Decimal(0))
        await settle_scan(
            session,
            scan,
            charge_micros=estimate_micros(prices, len(billed), scan.queue),
            provider_cost=cost,
            provider_micros=prices.provider_micros(cost),
            billed=len(billed),
            now=now,
        )
        record_drift(
            session,
            scan,
            billed=len(billed),
            provider_usd=cost,
            prices=prices,
            tolerance_percent=deps.settings.ranktracking.cost_tolerance_percent,
            now=now,
        )
        scan.provider_cost = cost
        SCANS.move(scan, DONE)
        scan.finished_at = now
        scan.updated_at = now


async def collect_tick(ctx: JobContext, tick: datetime) -> None:
    deps = RankTrackingDeps.of(ctx)
    read = await collect_ready(deps, deps.serp)
    if read:
        log.info("geo-grid collection", extra={"cells": read})


GEOGRID_SWEEP = Sweep("ranktracking.geogrid", EVERY_10_SECONDS, collect_tick)
