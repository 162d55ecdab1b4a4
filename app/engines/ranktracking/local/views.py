"""Reading and deleting geo-grid scans (RT-125): each cell's rank, the average rank where the
business is listed, and the share of read cells where it is in the top 3."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from app.db import keyset
from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking.local.models import (
    CELL_ABSENT,
    CELL_FOUND,
    COLLECTING,
    POSTING,
    RESERVED,
    GeoGrid,
    GeoGridCell,
)
from app.engines.ranktracking.local.schemas import GeoGridCellOut, GeoGridCompetitorOut, GeoGridOut
from app.errors import Conflict, NotFound


class GeoGridNotFound(NotFound):
    code = "geogrid_not_found"


async def get_scan(session: ReadSession, workspace_id: int, scan_id: int) -> GeoGrid:
    scan = await session.scalar(
        select(GeoGrid).where(GeoGrid.id == scan_id, GeoGrid.workspace_id == workspace_id)
    )
    if scan is None:
        raise GeoGridNotFound(f"geo-grid {scan_id} not found")
    return scan


async def cells_of(session: ReadSession, scan_id: int) -> list[GeoGridCell]:
    rows = await session.execute(
        select(GeoGridCell)
        .where(GeoGridCell.geogrid_id == scan_id)
        .order_by(GeoGridCell.row, GeoGridCell.col)
    )
    return list(rows.scalars())


async def list_scans(
    session: ReadSession, workspace_id: int, *, limit: int = 50, before_id: int | None = None
) -> list[GeoGrid]:
    stmt = select(GeoGrid).where(GeoGrid.workspace_id == workspace_id)
    if before_id is not None:
        stmt = stmt.where(keyset.before(GeoGrid.id, before_id))
    return list((await session.execute(stmt.order_by(GeoGrid.id.desc()).limit(limit))).scalars())


async def stats_of(session: ReadSession, scan_ids: list[int]) -> dict[int, list[int | None]]:
    """Each scan's ranks of its read cells (None where the business is not listed)."""
    ranks: dict[int, list[int | None]] = {i: [] for i in scan_ids}
    if not scan_ids:
        return ranks
    rows = await session.execute(
        select(GeoGridCell.geogrid_id, GeoGridCell.rank).where(
            GeoGridCell.geogrid_id.in_(scan_ids),
            GeoGridCell.state.in_((CELL_FOUND, CELL_ABSENT)),
        )
    )
    for scan_id, rank in rows.all():
        ranks[int(scan_id)].append(rank)
    return ranks


def scan_out(
    scan: GeoGrid, ranks: Sequence[int | None], cells: list[GeoGridCell] | None = None
) -> GeoGridOut:
    found = [r for r in ranks if r is not None]
    top3 = sum(1 for r in found if r <= 3)
    return GeoGridOut(
        id=scan.id,
        keyword=scan.keyword,
        engine=scan.engine,
        language_code=scan.language_code,
        business_name=scan.business_name,
        place_id=scan.place_id,
        cid=scan.cid,
        domain=scan.domain,
        latitude=scan.latitude,
        longitude=scan.longitude,
        size=scan.size,
        spacing_m=scan.spacing_m,
        zoom=scan.zoom,
        depth=scan.depth,
        queue=scan.queue,
        status=scan.status,
        reserved_micros=scan.reserved_micros,
        settled_micros=scan.settled_micros,
        provider_cost=str(scan.provider_cost) if scan.provider_cost is not None else None,
        error_message=scan.error_message,
        average_rank=round(sum(found) / len(found), 2) if found else None,
        found_cells=len(found),
        top3_share=round(top3 / len(ranks), 4) if ranks else 0.0,
        created_at=scan.created_at,
        finished_at=scan.finished_at,
        cells=None if cells is None else [_cell_out(c) for c in cells],
    )


def _cell_out(cell: GeoGridCell) -> GeoGridCellOut:
    return GeoGridCellOut(
        row=cell.row,
        column=cell.col,
        latitude=cell.latitude,
        longitude=cell.longitude,
        state=cell.state,
        rank=cell.rank,
        competitors=[
            GeoGridCompetitorOut(rank=int(c["rank"]), title=str(c["title"]), domain=c.get("domain"))
            for c in cell.competitors or []
        ],
    )


async def delete_scan(session: WriteSession, workspace_id: int, scan_id: int) -> None:
    """Delete a finished scan (its ledger entries stay: the ledger is append-only). A scan
    whose money is still held (being posted or collected) cannot be deleted yet."""
    scan = await get_scan(session, workspace_id, scan_id)
    if scan.status in (RESERVED, POSTING, COLLECTING):
        raise Conflict(
            "this scan is still running; delete it once it has finished",
            code="geogrid_running",
        )
    await session.execute(delete(GeoGrid).where(GeoGrid.id == scan.id))
