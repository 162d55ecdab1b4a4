"""Google Local Finder and Maps through the provider's documented endpoints (RT-121):
``/v3/serp/google/local_finder/task_post`` and ``task_get/advanced/{id}`` answering
``local_pack`` items, the business matched by place id, CID, domain or name, and its rank
depending on where the search is made from."""

from __future__ import annotations

import pytest

from app.engines.ranktracking.local.business import Business, find_business
from app.engines.ranktracking.local.geogrid import grid_cells
from app.integrations.serp import MapsTask, SerpClient
from app.sandbox.base import simulator_in_loop
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.local.helpers import CID, KEYWORD, PARIS, PLACE_ID, place


async def _ranks(sim: SerpSimulator, engine: str, business: Business) -> list[int | None]:
    cells = grid_cells(*PARIS, size=5, spacing_m=500, zoom=15)
    tasks = [
        MapsTask(
            tag=f"c{c.row}-{c.column}",
            keyword=KEYWORD,
            language_code="fr",
            location_coordinate=c.location_coordinate,
            depth=20,
        )
        for c in cells
    ]
    async with (
        simulator_in_loop(sim) as url,
        SerpClient(url, "sandbox", "sandbox-password", retries=0) as client,
    ):
        if engine == "local_finder":
            posted = await client.post_local_finder_tasks(tasks)
            results = [await client.get_local_finder_task(p.task_id) for p in posted]
        else:
            posted = await client.post_maps_tasks(tasks)
            results = [await client.get_maps_task(p.task_id) for p in posted]
    assert sim.count(f"{engine}.task_post") == 1
    ranks = []
    for result in results:
        assert result.state == "ok"
        assert len(result.listings) == 20
        found = find_business(result.listings, business)
        ranks.append(found.rank_group if found else None)
    return ranks


@pytest.mark.parametrize("engine", ["local_finder", "maps"])
@pytest.mark.parametrize(
    "business",
    [
        Business(place_id=PLACE_ID),
        Business(cid=CID),
        Business(domain="https://www.acme-bakery.fr/"),
        Business(name="boulangerie  ACME"),
    ],
)
async def test_rt121_rank_grows_with_distance_from_the_business(
    engine: str, business: Business
) -> None:
    """RT-121: the business is found by each of its identifiers on both engines; seen from its
    own door it is 2nd, and the farther the cell the lower it ranks (a corner 1.4 km away is
    5th), a gradient a heat map can show."""
    sim = SerpSimulator(seed=5)
    place(sim, 2)
    ranks = await _ranks(sim, engine, business)
    assert ranks[12] == 2  # the centre of a 5×5 grid
    assert ranks[0] == ranks[4] == ranks[20] == ranks[24] == 2 + 1414 // 400
    assert ranks[7] == 2 + 500 // 400
    assert all(r is not None and r >= 2 for r in ranks)


async def test_rt121_local_finder_speaks_the_documented_shape() -> None:
    """RT-121: a Local Finder page is ``local_pack`` items with rank_group, rank_absolute,
    title, domain, place_id and cid; a task is billed one base SERP price per 20 desktop
    results, and a bad ``location_coordinate`` is refused per task (40501, not billed)."""
    sim = SerpSimulator(seed=5)
    place(sim, 1)
    good = MapsTask(
        tag="a",
        keyword=KEYWORD,
        language_code="fr",
        location_coordinate="48.8566,2.3522,15z",
        depth=20,
    )
    deep = MapsTask(
        tag="c",
        keyword=KEYWORD,
        language_code="fr",
        location_coordinate="48.8566,2.3522,15z",
        depth=40,
    )
    bad = MapsTask(tag="b", keyword=KEYWORD, language_code="fr", location_coordinate="48.8,2.3")
    async with (
        simulator_in_loop(sim) as url,
        SerpClient(url, "sandbox", "sandbox-password", retries=0) as client,
    ):
        posted = await client.post_local_finder_tasks([good, bad, deep])
        result = await client.get_local_finder_task(posted[0].task_id)
    assert posted[1].status_code == 40501
    assert not posted[1].task_id
    assert [str(p.cost) for p in posted] == ["0.0006", "0", "0.0012"]
    assert sim.total_cost == posted[0].cost + posted[2].cost
    first = result.listings[0]
    assert (first.rank_group, first.rank_absolute, first.title) == (1, 1, "Boulangerie Acme")
    assert (first.place_id, first.cid, first.domain) == (PLACE_ID, CID, "acme-bakery.fr")
