"""Geo-grid test builders: a business placed on the simulator's Maps and Local Finder pages at
a point, a scan started and posted, and its cells collected."""

from __future__ import annotations

from typing import Any

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.local.collect import collect_ready
from app.engines.ranktracking.local.models import GeoGrid, GeoGridCell
from app.engines.ranktracking.local.posting import post_scan
from app.engines.ranktracking.local.scans import start_scan
from app.engines.ranktracking.local.schemas import GeoGridIn
from app.engines.ranktracking.local.views import cells_of
from app.engines.ranktracking.pricing import PriceList
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.factories import Tenant

PARIS = (48.8566, 2.3522)
KEYWORD = "boulangerie"
PLACE_ID = "ChIJ-acme-bakery-0000001"
CID = "1234567890123456789"


def place(sim: SerpSimulator, position: int = 2) -> None:
    """The tracked bakery at ``position`` seen from its own door in Paris; it drops a place
    every 400 m further away."""
    sim.place_business(
        KEYWORD,
        "Boulangerie Acme",
        position,
        place_id=PLACE_ID,
        cid=CID,
        domain="acme-bakery.fr",
        at=PARIS,
    )


def scan_in(**overrides: Any) -> GeoGridIn:
    fields: dict[str, Any] = {
        "keyword": KEYWORD,
        "latitude": PARIS[0],
        "longitude": PARIS[1],
        "place_id": PLACE_ID,
        "size": 3,
        "spacing_m": 500,
        "zoom": 15,
        "language_code": "fr",
    }
    fields.update(overrides)
    return GeoGridIn(**fields)


async def start(runtime: Runtime, tenant: Tenant, data: GeoGridIn) -> int:
    async with runtime.db.write() as uow:
        scan = await start_scan(
            uow.session,
            PriceList.from_settings(runtime.settings.ranktracking),
            data,
            workspace_id=tenant.workspace_id,
            organisation_id=tenant.organisation_id,
            user_id=tenant.user_id,
            now=runtime.clock.now(),
        )
        return scan.id


async def run(runtime: Runtime, tenant: Tenant, data: GeoGridIn) -> int:
    """Start, post and collect a scan until it is settled."""
    scan_id = await start(runtime, tenant, data)
    deps = RankTrackingDeps.of(runtime)
    assert await post_scan(deps, scan_id)
    await finish(runtime, scan_id)
    return scan_id


async def finish(runtime: Runtime, scan_id: int) -> None:
    deps = RankTrackingDeps.of(runtime)
    for _ in range(5):
        await collect_ready(deps, deps.serp)
        if (await load(runtime, scan_id))[0].status == "done":
            return


async def load(runtime: Runtime, scan_id: int) -> tuple[GeoGrid, list[GeoGridCell]]:
    async with runtime.db.read() as session:
        scan = await session.get(GeoGrid, scan_id, populate_existing=True)
        assert scan is not None
        return scan, await cells_of(session, scan_id)
