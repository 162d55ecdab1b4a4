"""Google Maps rank of a business through the provider's Maps endpoints (``task_post``,
``task_get/advanced``), against the simulator: found by place id, CID, domain or name, not found,
a location coordinate, the price of a task, and garbage answers (spec RT-49 to RT-52)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.engines.ranktracking.local.business import Business, find_business
from app.integrations.serp import (
    MapsListing,
    MapsTask,
    MapsTaskResult,
    ProviderError,
    SerpClient,
    maps_coordinate,
)
from app.sandbox.base import simulator_in_loop
from app.sandbox.serp import SerpSimulator

LOGIN, PASSWORD = "sandbox", "sandbox-password"
KEYWORD = "bakery near me"
PLACE_ID, CID = "ChIJ-our-bakery-0000000001", "1234567890123456789"


def maps_task(tag: str = "t1", keyword: str = KEYWORD, **kwargs: object) -> MapsTask:
    fields: dict[str, object] = {
        "location_coordinate": maps_coordinate(48.8566, 2.3522, 15),
        "language_code": "fr",
    }
    fields.update(kwargs)
    return MapsTask(tag=tag, keyword=keyword, **fields)  # type: ignore[arg-type]


async def fetch(sim: SerpSimulator, *tasks: MapsTask) -> list[MapsTaskResult]:
    async with (
        simulator_in_loop(sim) as url,
        SerpClient(url, LOGIN, PASSWORD, retries=0) as client,
    ):
        posted = await client.post_maps_tasks(list(tasks))
        return [await client.get_maps_task(p.task_id) for p in posted]


def our_bakery(sim: SerpSimulator, position: int | None) -> None:
    sim.place_business(
        KEYWORD,
        "Boulangerie Café de l'Est",
        position,
        place_id=PLACE_ID,
        cid=CID,
        domain="cafe-est.fr",
    )


@pytest.mark.parametrize(
    "business",
    [
        Business(place_id=PLACE_ID),
        Business(cid=CID),
        Business(domain="https://www.cafe-est.fr/"),
        Business(name="boulangerie  CAFE de l’est"),
    ],
    ids=["place_id", "cid", "domain", "name"],
)
async def test_business_rank_found_by_each_identifier(business: Business) -> None:
    """RT-49: the business placed 4th on the Maps page is found 4th by its place id, its CID,
    its website's domain (any form of it) or its name (without case, accents, punctuation)."""
    sim = SerpSimulator(seed=3)
    our_bakery(sim, 4)
    [result] = await fetch(sim, maps_task())
    assert result.state == "ok"
    assert [x.rank_absolute for x in result.listings] == list(range(1, 21))
    found = find_business(result.listings, business)
    assert found is not None
    assert (found.rank_group, found.place_id, found.cid) == (4, PLACE_ID, CID)


async def test_business_not_on_the_page_is_not_found() -> None:
    """RT-49: a business absent from the page is ``None`` for every identifier — a strong id never
    falls back to a looser match (a listing with the same name but another place id)."""
    sim = SerpSimulator(seed=3)
    our_bakery(sim, None)
    sim.place_business(KEYWORD, "Boulangerie Café de l'Est", 2, place_id="ChIJ-other", cid="9")
    [result] = await fetch(sim, maps_task())
    assert find_business(result.listings, Business(place_id=PLACE_ID)) is None
    assert find_business(result.listings, Business(cid=CID)) is None
    assert find_business(result.listings, Business(domain="cafe-est.fr")) is None
    named = find_business(result.listings, Business(name="Boulangerie Café de l'Est"))
    assert named is not None
    assert named.place_id == "ChIJ-other"
    with pytest.raises(ValueError, match="place_id"):
        Business()


async def test_depth_cuts_the_page_and_subdomains_match_the_domain() -> None:
    """RT-49: a depth-3 task lists 3 businesses; a listing on a subdomain is the domain's."""
    sim = SerpSimulator(seed=3)
    sim.place_business(KEYWORD, "Shop", 2, place_id="p", cid="1", domain="paris.cafe-est.fr")
    [result] = await fetch(sim, maps_task(depth=3))
    assert len(result.listings) == 3
    found = find_business(result.listings, Business(domain="cafe-est.fr"))
    assert found is not None
    assert found.rank_group == 2
    assert find_business(result.listings, Business(domain="est.fr")) is None


async def test_location_coordinate_is_posted_and_priced_per_task() -> None:
    """RT-50: the coordinate goes to the provider as "lat,lng,zoomz"; a task is billed the Maps
    price of its queue, whatever its depth; a coordinate out of range is refused before a call."""
    sim = SerpSimulator(seed=1)
    tasks = [
        maps_task("a"),
        maps_task("b", depth=100, priority=2),
        maps_task("c", location_coordinate=None, location_code=2250),
    ]
    results = await fetch(sim, *tasks)
    assert [r.state for r in results] == ["ok", "ok", "ok"]
    assert [r.cost for r in results] == [Decimal("0.0006"), Decimal("0.0012"), Decimal("0.0006")]
    assert sim.total_cost == Decimal("0.0024")
    stored = sim.task(results[0].task_id)
    assert stored is not None
    assert stored["location_coordinate"] == "48.8566000,2.3522000,15z"
    for bad, field in [((91, 0, 15), "latitude"), ((0, 181, 15), "longitude"), ((0, 0, 2), "zoom")]:
        with pytest.raises(ValueError, match=field):
            maps_coordinate(*bad)


async def test_invalid_task_is_refused_by_the_provider_with_its_field() -> None:
    """RT-50: the simulator refuses a malformed coordinate with ``40501`` naming the field, and
    the client refuses a task with both or neither location before any call."""
    sim = SerpSimulator(seed=1)
    async with (
        simulator_in_loop(sim) as url,
        SerpClient(url, LOGIN, PASSWORD, retries=0) as client,
    ):
        [posted] = await client.post_maps_tasks([maps_task(location_coordinate="48.8,2.3,40z")])
        assert posted.task_id == ""
        assert (posted.status_code, posted.status_message) == (
            40501,
            "Invalid Field: 'location_coordinate'.",
        )
        with pytest.raises(ValueError, match="location"):
            await client.post_maps_tasks([maps_task(location_code=2250)])
    assert sim.total_cost == 0


async def test_no_results_and_task_errors_are_states_not_listings() -> None:
    """RT-51: "No Search Results" and a failed task come back as states with no listing."""
    sim = SerpSimulator(seed=1)
    sim.script("empty town", no_data=True)
    sim.script("broken town", task_error=50000)
    empty, broken = await fetch(sim, maps_task("e", "empty town"), maps_task("b", "broken town"))
    assert (empty.state, empty.listings) == ("no_results", [])
    assert (broken.state, broken.status_code, broken.listings) == ("error", 50000, [])


@pytest.mark.parametrize(
    "body",
    [
        b"<html>bad gateway</html>",
        b'{"status_code": 20000, "tasks": [{"status_code": 20000, "result": [{"items": '
        b'[{"type": "maps_search", "rank_group": "first"}]}]}]}',
        b'{"status_code": 20000, "tasks": "nope"}',
        b'{"status_code": 20000, "tasks": []}',
    ],
    ids=["html", "wrong-type", "tasks-not-a-list", "no-task"],
)
async def test_garbage_from_the_provider_is_a_provider_error(body: bytes) -> None:
    """RT-51: an answer that is not the documented shape raises a ProviderError naming the Maps
    endpoint, never an AttributeError or a half-read page."""
    sim = SerpSimulator(seed=1)
    sim.state.inject("maps.task_get", status=200, raw=body, times=10)
    async with (
        simulator_in_loop(sim) as url,
        SerpClient(url, LOGIN, PASSWORD, retries=0) as client,
    ):
        [posted] = await client.post_maps_tasks([maps_task()])
        with pytest.raises(ProviderError, match="/v3/serp/google/maps/task_get/advanced/"):
            await client.get_maps_task(posted.task_id)


def test_listings_of_other_types_and_order_are_normalised() -> None:
    """RT-49: the best-ranked listing wins when a business appears twice."""
    listings = [
        MapsListing(rank_group=7, rank_absolute=7, title="A", place_id="x"),
        MapsListing(rank_group=3, rank_absolute=3, title="A", place_id="x"),
    ]
    found = find_business(listings, Business(place_id="x"))
    assert found is not None
    assert found.rank_group == 3
