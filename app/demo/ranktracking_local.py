"""Demo data of local search: the demo shop placed on the simulator's Maps and Local Finder pages
in Lyon, and a 5×5 geo-grid around it, reserved from the demo balance, so the Local grids page
shows a heat map: the geo-grid sweep posts it and collects its cells within seconds of the start
(seeding itself makes no provider call)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engines.ranktracking.local.scans import start_scan
from app.engines.ranktracking.local.schemas import GeoGridIn
from app.engines.ranktracking.pricing import PriceList

if TYPE_CHECKING:
    from app.demo.parts import DemoWorkspace
    from app.runtime import Runtime
    from app.sandbox.serp import SerpSimulator

LOCAL_KEYWORD = "outdoor gear shop"
SHOP = "Sweepline Outdoor Lyon"
SHOP_PLACE_ID = "ChIJ-sweepline-demo-lyon-01"
SHOP_CID = "4242424242424242424"
LYON = (45.7640, 4.8357)


def place_shop(sim: SerpSimulator, domain: str) -> None:
    """The shop 2nd seen from its door, one place lower every 400 m away."""
    sim.place_business(
        LOCAL_KEYWORD, SHOP, 2, place_id=SHOP_PLACE_ID, cid=SHOP_CID, domain=domain, at=LYON
    )


async def seed_geogrid(runtime: Runtime, demo: DemoWorkspace) -> None:
    async with runtime.db.write() as uow:
        await start_scan(
            uow.session,
            PriceList.from_settings(runtime.settings.ranktracking),
            GeoGridIn(
                keyword=LOCAL_KEYWORD,
                latitude=LYON[0],
                longitude=LYON[1],
                business_name=SHOP,
                place_id=SHOP_PLACE_ID,
                size=5,
                spacing_m=600,
                zoom=14,
                language_code="fr",
            ),
            workspace_id=demo.workspace_id,
            organisation_id=demo.organisation_id,
            user_id=demo.admin_user_id,
            now=runtime.clock.now(),
        )
