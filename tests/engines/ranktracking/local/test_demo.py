"""The demo workspace's geo-grid (RT-127): seeded with the demo, reserved from its balance,
posted to the demo's simulator and collected by the sweep into a heat map with a gradient."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.db.session import Database
from app.demo import ensure_demo, settings_for_sandboxes, simulated, start_sandboxes
from app.demo.ranktracking_local import LOCAL_KEYWORD
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.local.collect import collect_ready
from app.engines.ranktracking.local.models import GeoGrid
from app.engines.ranktracking.local.views import cells_of
from app.integrations.serp import SerpClient
from app.settings import Settings
from app.wiring import assemble
from tests.conftest import START, truncate_all, with_own_queue


@pytest.fixture
async def clean(shared_db: Database) -> AsyncIterator[Database]:
    yield shared_db
    await truncate_all(shared_db)


async def test_rt127_the_demo_has_a_geogrid(settings: Settings, clean: Database) -> None:
    """RT-127: the demo seeds a 5×5 grid, reserved and not posted; the sweep posts and collects
    it: the shop 2nd at its door, lower towards the corners."""
    handles = start_sandboxes(simulated({}))
    urls = {name: h.url for name, h in handles.items()}
    rt = assemble(
        settings_for_sandboxes(with_own_queue(settings), urls), ManualClock(START), db=clean
    )
    try:
        await ensure_demo(rt, urls)
        deps = RankTrackingDeps.of(rt)
        # The production client, unpaced: the manual clock never refills a bucket.
        async with SerpClient(urls["serp"], "demo", "demo", retries=0) as client:
            for _ in range(3):
                await collect_ready(deps, client)
        async with rt.db.read() as session:
            scan = await session.scalar(select(GeoGrid))
            assert scan is not None
            cells = await cells_of(session, scan.id)
        assert scan.keyword == LOCAL_KEYWORD
        assert scan.status == "done"
        assert cells[12].rank == 2
        assert cells[0].rank is not None
        assert cells[0].rank > 2
    finally:
        await rt.stop()
        await rt.resources.aclose()
        await rt.queue.aclose()
        for handle in handles.values():
            handle.stop()
