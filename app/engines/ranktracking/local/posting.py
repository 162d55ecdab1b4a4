"""Posting a geo-grid scan's tasks exactly once (RT-124).

Whoever moves the scan from ``reserved`` to ``posting`` with a conditional ``UPDATE`` posts its
cells; every other caller (a retried request, a second click, a sweep) changes nothing and
posts nothing. Each cell is one task tagged ``g{scan}-{cell}`` with its ``location_coordinate``;
the provider's answer is written back per cell: a created task (billed) is ``posted``, a refused
one ``failed`` (not billed). When nothing at all was created the reservation is released.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select, update

from app.db.dialect import row_count
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.local.models import (
    CELL_FAILED,
    CELL_NEW,
    CELL_POSTED,
    CELLS,
    COLLECTING,
    FAILED,
    LOCAL_FINDER,
    POSTING,
    RESERVED,
    SCANS,
    GeoGrid,
    GeoGridCell,
)
from app.engines.ranktracking.local.money import release_scan
from app.engines.ranktracking.local.scans import start_scan
from app.engines.ranktracking.local.schemas import GeoGridIn
from app.engines.ranktracking.pricing import PRIORITY, PriceList
from app.integrations.serp import MapsTask, PostedTask, ProviderError, SerpClient
from app.integrations.serp.codes import TASK_CREATED

log = logging.getLogger(__name__)


async def claim_posting(deps: RankTrackingDeps, scan_id: int, now: datetime) -> bool:
    """True for the one caller that moved the scan out of ``reserved``."""
    async with deps.db.write() as uow:
        result = await uow.session.execute(
            SCANS.transition(
                update(GeoGrid).where(GeoGrid.id == scan_id), POSTING, from_=(RESERVED,)
            )
            .values(updated_at=now)
            .execution_options(synchronize_session=False)
        )
        return bool(row_count(result))


async def post_scan(deps: RankTrackingDeps, scan_id: int, client: SerpClient | None = None) -> bool:
    """Post the scan's tasks if this caller wins the claim; False when another did."""
    if not await claim_posting(deps, scan_id, deps.clock.now()):
        return False
    async with deps.db.read() as session:
        scan = await session.get(GeoGrid, scan_id)
        cells = list(
            (
                await session.execute(
                    select(GeoGridCell)
                    .where(GeoGridCell.geogrid_id == scan_id, GeoGridCell.state == CELL_NEW)
                    .order_by(GeoGridCell.id)
                )
            ).scalars()
        )
    if scan is None:
        return False
    tasks = [_task(scan, cell) for cell in cells]
    error: str | None = None
    try:
        posted = await _post(client or deps.serp, scan.engine, tasks)
    except ProviderError as exc:
        posted, error = list(exc.posted or []), exc.message
        log.warning("geo-grid %s: posting failed: %s", scan_id, exc.message)
    await _record(deps, scan_id, cells, posted, error)
    return True


def _task(scan: GeoGrid, cell: GeoGridCell) -> MapsTask:
    return MapsTask(
        tag=f"g{scan.id}-{cell.id}",
        keyword=scan.keyword,
        language_code=scan.language_code,
        location_coordinate=cell.location_coordinate,
        depth=scan.depth,
        priority=2 if scan.queue == PRIORITY else 1,
    )


async def _post(client: SerpClient, engine: str, tasks: list[MapsTask]) -> list[PostedTask]:
    if engine == LOCAL_FINDER:
        return await client.post_local_finder_tasks(tasks)
    return await client.post_maps_tasks(tasks)


async def _record(
    deps: RankTrackingDeps,
    scan_id: int,
    cells: list[GeoGridCell],
    posted: list[PostedTask],
    error: str | None,
) -> None:
    """Write each cell's task (matched by its tag) and move the scan on."""
    by_tag = {p.tag: p for p in posted}
    now = deps.clock.now()
    created = 0
    async with deps.db.write() as uow:
        session = uow.session
        for cell in cells:
            answer = by_tag.get(f"g{scan_id}-{cell.id}")
            stmt = update(GeoGridCell).where(GeoGridCell.id == cell.id)
            if answer is not None and answer.status_code == TASK_CREATED and answer.task_id:
                stmt = CELLS.transition(stmt, CELL_POSTED, from_=(CELL_NEW,)).values(
                    task_id=answer.task_id, cost=answer.cost
                )
                created += 1
            else:
                message = answer.status_message if answer is not None else error
                stmt = CELLS.transition(stmt, CELL_FAILED, from_=(CELL_NEW,)).values(
                    error_message=message or "not posted"
                )
            await session.execute(stmt)
        scan = (
            await session.execute(select(GeoGrid).where(GeoGrid.id == scan_id).with_for_update())
        ).scalar_one()
        scan.updated_at = now
        scan.posted_at = now
        if created:
            SCANS.move(scan, COLLECTING)
            scan.error_message = error
        else:
            SCANS.move(scan, FAILED)
            scan.finished_at = now
            scan.error_message = error or "the provider created no task"
            await release_scan(session, scan, now, "nothing was posted")


async def start_and_post(
    deps: RankTrackingDeps,
    data: GeoGridIn,
    *,
    workspace_id: int,
    organisation_id: int,
    user_id: int | None,
) -> int:
    """Run a scan now: written and reserved in one transaction, posted after its commit."""
    prices = PriceList.from_settings(deps.settings.ranktracking)
    async with deps.db.write() as uow:
        scan = await start_scan(
            uow.session,
            prices,
            data,
            workspace_id=workspace_id,
            organisation_id=organisation_id,
            user_id=user_id,
            now=deps.clock.now(),
        )
        scan_id = scan.id
    await post_scan(deps, scan_id)
    return scan_id
