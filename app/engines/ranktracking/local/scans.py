"""Starting a geo-grid scan (RT-121, RT-123): its input checked field by field, its cost
estimated at the provider's SERP price per cell and reserved from the balance, its cells
written, all in the caller's transaction (a refusal leaves nothing behind)."""

from __future__ import annotations

import re
from datetime import datetime

from app.db.session import WriteSession
from app.engines.ranktracking.local.business import Business
from app.engines.ranktracking.local.geogrid import GridCell, GridError, grid_cells
from app.engines.ranktracking.local.models import (
    CELL_NEW,
    CELLS,
    ENGINES,
    RESERVED,
    SCAN_RESERVATIONS,
    SCANS,
    GeoGrid,
    GeoGridCell,
)
from app.engines.ranktracking.local.money import reserve_scan
from app.engines.ranktracking.local.schemas import GeoGridIn
from app.engines.ranktracking.models import RES_NONE
from app.engines.ranktracking.pricing import QUEUES, PriceList
from app.errors import ValidationFailed

DEPTH = 20
"""Listings read per cell: the Local Finder's one billed desktop SERP, and the top 20 an SEO
reads on Maps; the business is "not in the top 20" below that."""
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[a-z]{2,4})?$")


def checked(data: GeoGridIn) -> tuple[Business, list[GridCell]]:
    """The business and cells of ``data``; a bad field raises naming it."""
    keyword = " ".join(data.keyword.split())
    if not keyword or len(keyword) > 200:
        raise ValidationFailed.field("keyword", "give a keyword of 1 to 200 characters")
    if data.engine not in ENGINES:
        raise ValidationFailed.field("engine", f"must be one of {', '.join(ENGINES)}")
    if not _LANGUAGE.match(data.language_code):
        raise ValidationFailed.field("language_code", "a language code such as en or pt-br")
    if data.queue not in QUEUES:
        raise ValidationFailed.field("queue", f"must be one of {', '.join(QUEUES)}")
    for field in ("business_name", "place_id", "cid", "domain"):
        value = getattr(data, field)
        if value is not None and (not value.strip() or len(value) > 200):
            raise ValidationFailed.field(field, "1 to 200 characters, or leave it out")
    if data.cid is not None and not data.cid.strip().isdigit():
        raise ValidationFailed.field("cid", "the number in the business's Maps address")
    try:
        business = Business(
            place_id=_clean(data.place_id),
            cid=_clean(data.cid),
            domain=_clean(data.domain),
            name=_clean(data.business_name),
        )
    except ValueError:
        raise ValidationFailed.field(
            "business_name", "name the business, or give its place id, CID or domain"
        ) from None
    try:
        cells = grid_cells(
            data.latitude, data.longitude, size=data.size, spacing_m=data.spacing_m, zoom=data.zoom
        )
    except GridError as exc:
        raise ValidationFailed.field(exc.field, str(exc).split(": ", 1)[-1]) from None
    return business, cells


def _clean(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


def estimate_micros(prices: PriceList, cells: int, queue: str) -> int:
    """One SERP per cell at the queue's price (a Maps SERP covers 100 desktop results and a
    Local Finder SERP 20: both one base price at depth 20)."""
    return prices.maps_micros(cells, queue=queue)


async def start_scan(
    session: WriteSession,
    prices: PriceList,
    data: GeoGridIn,
    *,
    workspace_id: int,
    organisation_id: int,
    user_id: int | None,
    now: datetime,
) -> GeoGrid:
    """Write the scan, its cells and its reservation (status ``reserved``); posting is
    :func:`app.engines.ranktracking.local.posting.post_scan`, after the commit."""
    business, cells = checked(data)
    scan = GeoGrid(
        workspace_id=workspace_id,
        organisation_id=organisation_id,
        created_by=user_id,
        keyword=" ".join(data.keyword.split()),
        engine=data.engine,
        language_code=data.language_code,
        business_name=business.name,
        place_id=business.place_id,
        cid=business.cid,
        domain=business.domain,
        latitude=data.latitude,
        longitude=data.longitude,
        size=data.size,
        spacing_m=data.spacing_m,
        zoom=data.zoom,
        depth=DEPTH,
        queue=data.queue,
        **SCANS.create(RESERVED),
        reserved_micros=0,
        **SCAN_RESERVATIONS.create(RES_NONE),
        created_at=now,
        updated_at=now,
    )
    session.add(scan)
    await session.flush()
    await reserve_scan(session, scan, estimate_micros(prices, len(cells), data.queue), now)
    session.add_all(
        GeoGridCell(
            geogrid_id=scan.id,
            workspace_id=workspace_id,
            row=cell.row,
            col=cell.column,
            latitude=cell.latitude,
            longitude=cell.longitude,
            location_coordinate=cell.location_coordinate,
            **CELLS.create(CELL_NEW),
            fetch_attempts=0,
        )
        for cell in cells
    )
    await session.flush()
    return scan


def rerun_input(scan: GeoGrid) -> GeoGridIn:
    """The input that starts ``scan`` again."""
    return GeoGridIn(
        keyword=scan.keyword,
        latitude=scan.latitude,
        longitude=scan.longitude,
        business_name=scan.business_name,
        place_id=scan.place_id,
        cid=scan.cid,
        domain=scan.domain,
        size=scan.size,
        spacing_m=scan.spacing_m,
        zoom=scan.zoom,
        engine=scan.engine,
        language_code=scan.language_code,
        queue=scan.queue,
    )
