"""Geo-grid cells and their price: N×N Maps searches around a point, each billed once at the
provider's Maps price (spec RT-52, RT-53)."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from app.engines.ranktracking.local.geogrid import GridError, grid_cells
from app.engines.ranktracking.pricing import PRIORITY, STANDARD, PriceList
from app.integrations.serp import MapsTask, SerpClient
from app.sandbox.base import simulator_in_loop
from app.sandbox.serp import SerpSimulator
from app.settings import RankTrackingSettings

PARIS = (48.8566, 2.3522)


def metres(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Haversine distance on the Earth's mean radius."""
    la1, lo1, la2, lo2 = map(math.radians, (*a, *b))
    h = (
        math.sin((la2 - la1) / 2) ** 2
        + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    )
    return 2 * 6_371_008.8 * math.asin(math.sqrt(h))


@pytest.mark.parametrize("size", [3, 5])
def test_cells_are_evenly_spaced_around_the_centre(size: int) -> None:
    """RT-52: N×N cells, row 0 north, column 0 west, the centre cell on the point, neighbours
    ``spacing_m`` apart (within a metre), each with its "lat,lng,zoomz" coordinate."""
    cells = grid_cells(*PARIS, size=size, spacing_m=500, zoom=15)
    assert len(cells) == size * size
    centre = cells[(size * size) // 2]
    assert (centre.latitude, centre.longitude) == PARIS
    assert centre.location_coordinate == "48.8566000,2.3522000,15z"
    assert cells[0].latitude > centre.latitude
    assert cells[0].longitude < centre.longitude
    for cell in cells:
        if cell.column + 1 < size:
            east = cells[cell.row * size + cell.column + 1]
            assert (
                abs(metres((cell.latitude, cell.longitude), (east.latitude, east.longitude)) - 500)
                < 1
            )
        if cell.row + 1 < size:
            south = cells[(cell.row + 1) * size + cell.column]
            assert (
                abs(
                    metres((cell.latitude, cell.longitude), (south.latitude, south.longitude)) - 500
                )
                < 1
            )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"size": 4}, "size"),
        ({"spacing_m": 50}, "spacing_m"),
        ({"spacing_m": 20_000}, "spacing_m"),
        ({"zoom": 22}, "zoom"),
        ({"latitude": 95.0}, "latitude"),
        ({"longitude": -181.0}, "longitude"),
        ({"latitude": 84.99, "size": 9, "spacing_m": 10_000}, "latitude"),
    ],
)
def test_bad_grid_names_the_field(kwargs: dict[str, float], field: str) -> None:
    """RT-52: an impossible grid is refused naming its field, before anything is posted."""
    args: dict[str, float] = {
        "latitude": PARIS[0],
        "longitude": PARIS[1],
        "size": 3,
        "spacing_m": 500,
        "zoom": 15,
    }
    args.update(kwargs)
    with pytest.raises(GridError) as caught:
        grid_cells(args.pop("latitude"), args.pop("longitude"), **args)  # type: ignore[arg-type]
    assert caught.value.field == field


@pytest.mark.parametrize("size", [3, 5])
async def test_grid_cost_is_cells_times_the_maps_price_and_matches_the_bill(size: int) -> None:
    """RT-53: a grid costs cells × the Maps price (in micro-euros at the configured rate), and
    the provider bills exactly that for its cells — converted at the same rate, the bill equals
    the quote to the micro-euro."""
    prices = PriceList.from_settings(RankTrackingSettings())
    unit = prices.maps_micros(1, queue=STANDARD)
    assert prices.maps_micros(size * size, queue=STANDARD) == size * size * unit
    assert prices.maps_micros(size * size, queue=PRIORITY) == 2 * size * size * unit
    sim = SerpSimulator(seed=2)
    cells = grid_cells(*PARIS, size=size, spacing_m=1000, zoom=14)
    tasks = [
        MapsTask(
            tag=f"cell-{c.row}-{c.column}",
            keyword="bakery",
            language_code="fr",
            location_coordinate=c.location_coordinate,
        )
        for c in cells
    ]
    async with (
        simulator_in_loop(sim) as url,
        SerpClient(url, "sandbox", "sandbox-password", retries=0) as client,
    ):
        posted = await client.post_maps_tasks(tasks)
    assert all(p.task_id for p in posted)
    billed_usd = sum((p.cost for p in posted), Decimal(0))
    assert billed_usd == sim.total_cost == prices.maps_task_usd * size * size
    assert prices.provider_micros(billed_usd) == prices.maps_micros(size * size, queue=STANDARD)
