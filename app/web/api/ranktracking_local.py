"""Local search geo-grids in the JSON API under ``/api/v1/ranktracking/geogrids`` (RT-121..RT-127):
estimate a scan, start one now (its cost reserved from the balance like any run; 402 with the
estimate and the available balance when it is short), list, read (each cell's rank, the average
rank, the share of top-3 cells) and delete. A bad field answers 422 naming it."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, delete, get, post
from litestar.params import JSONBody

from app.db.session import UnitOfWork
from app.engines.ranktracking import ledger
from app.engines.ranktracking.amounts import exact_eur
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.local import views
from app.engines.ranktracking.local.posting import post_scan
from app.engines.ranktracking.local.scans import checked, estimate_micros, rerun_input, start_scan
from app.engines.ranktracking.local.schemas import (
    GeoGridEstimateOut,
    GeoGridIn,
    GeoGridList,
    GeoGridOut,
)
from app.engines.ranktracking.pricing import PriceList
from app.web.api.common import RowId, idempotent
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import CurrentSettings, Reads, Writes

GEOGRIDS = "/geogrids"


@post(f"{GEOGRIDS}/estimate", status_code=200)
async def estimate_geogrid(
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    data: JSONBody[GeoGridIn],
) -> GeoGridEstimateOut:
    """What a scan would reserve (one SERP per cell at the provider's price) and what the
    balance has available; nothing is written."""
    _, cells = checked(data)
    micros = estimate_micros(PriceList.from_settings(settings.ranktracking), len(cells), data.queue)
    balance = await ledger.balance_of(session, principal.organisation_id)
    return GeoGridEstimateOut(
        cells=len(cells),
        estimate_micros=micros,
        estimate_eur=exact_eur(micros),
        available_micros=balance.available_micros,
    )


async def _start(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: GeoGridIn,
) -> Response[GeoGridOut]:
    deps = RankTrackingDeps.of(runtime)
    prices = PriceList.from_settings(runtime.settings.ranktracking)

    async def action(uow: UnitOfWork) -> GeoGridOut:
        scan = await start_scan(
            uow.session,
            prices,
            data,
            workspace_id=principal.workspace_id,
            organisation_id=principal.organisation_id,
            user_id=principal.user_id,
            now=deps.clock.now(),
        )
        return views.scan_out(scan, [])

    async def finish(out: GeoGridOut) -> GeoGridOut:
        # Posted after the commit, by whoever claims the scan first (a replay claims nothing).
        await post_scan(deps, out.id)
        async with runtime.db.read() as session:
            scan = await views.get_scan(session, principal.workspace_id, out.id)
            return views.scan_out(scan, [], await views.cells_of(session, scan.id))

    return await idempotent(request, principal, runtime, action, status_code=201, finish=finish)


@post(GEOGRIDS)
async def create_geogrid(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: JSONBody[GeoGridIn],
) -> Response[GeoGridOut]:
    """Start a scan now: estimated, reserved, its N×N tasks posted; the cells fill in as the
    provider delivers them (read it again with GET)."""
    return await _start(request, principal, runtime, data)


@post(f"{GEOGRIDS}/{{geogrid_id:int}}/rerun")
async def rerun_geogrid(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    geogrid_id: RowId,
) -> Response[GeoGridOut]:
    """The same scan again, now (a new scan, estimated and reserved like the first)."""
    async with runtime.db.read() as session:
        scan = await views.get_scan(session, principal.workspace_id, geogrid_id)
    return await _start(request, principal, runtime, rerun_input(scan))


@get(GEOGRIDS)
async def list_geogrids(principal: CurrentPrincipal, session: Reads) -> GeoGridList:
    """The workspace's 50 newest scans with their summary figures (no cells)."""
    scans = await views.list_scans(session, principal.workspace_id)
    ranks = await views.stats_of(session, [s.id for s in scans])
    return GeoGridList(items=[views.scan_out(s, ranks[s.id]) for s in scans])


@get(f"{GEOGRIDS}/{{geogrid_id:int}}")
async def get_geogrid(principal: CurrentPrincipal, session: Reads, geogrid_id: RowId) -> GeoGridOut:
    """One scan with every cell: its rank (None: not in the top 20, or not read yet; see
    ``state``) and the first competitors it saw."""
    scan = await views.get_scan(session, principal.workspace_id, geogrid_id)
    ranks = (await views.stats_of(session, [scan.id]))[scan.id]
    return views.scan_out(scan, ranks, await views.cells_of(session, scan.id))


@delete(f"{GEOGRIDS}/{{geogrid_id:int}}")
async def delete_geogrid(principal: CurrentPrincipal, uow: Writes, geogrid_id: RowId) -> None:
    """Delete a finished scan (409 while it runs); its ledger entries stay."""
    await views.delete_scan(uow.session, principal.workspace_id, geogrid_id)


HANDLERS: list[Any] = [
    estimate_geogrid,
    create_geogrid,
    rerun_geogrid,
    list_geogrids,
    get_geogrid,
    delete_geogrid,
]
