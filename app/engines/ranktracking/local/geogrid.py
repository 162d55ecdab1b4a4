"""A geo-grid: the same keyword searched on Google Maps from N×N points around a business.

The points are spread evenly, ``spacing_m`` metres apart, on a square centred on the given point
(row 0 is the northernmost, column 0 the westernmost), each sent to the provider as a
``location_coordinate`` at the grid's zoom. Metres become degrees on a sphere of the Earth's mean
radius: at the few kilometres a local grid spans the error is far below a street's width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.integrations.serp import maps_coordinate

GRID_SIZES = (3, 5, 7, 9)
"""Odd sizes only, so that the business's own point is the centre cell."""
MIN_SPACING_M, MAX_SPACING_M = 100, 10_000
_METRES_PER_DEGREE = math.pi * 6_371_008.8 / 180


class GridError(ValueError):
    """A grid that cannot be searched; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class GridCell:
    row: int
    column: int
    latitude: float
    longitude: float
    location_coordinate: str


def grid_cells(
    latitude: float, longitude: float, *, size: int, spacing_m: int, zoom: int
) -> list[GridCell]:
    """The ``size × size`` cells around (``latitude``, ``longitude``), row by row."""
    if size not in GRID_SIZES:
        raise GridError("size", f"must be one of {', '.join(map(str, GRID_SIZES))}")
    if not MIN_SPACING_M <= spacing_m <= MAX_SPACING_M:
        raise GridError("spacing_m", f"must be between {MIN_SPACING_M} and {MAX_SPACING_M}")
    try:
        maps_coordinate(latitude, longitude, zoom)
    except ValueError as exc:
        field = str(exc).split(" ", 1)[0]
        raise GridError(field, str(exc)) from None
    half = size // 2
    degrees_lat = spacing_m / _METRES_PER_DEGREE
    degrees_lng = degrees_lat / math.cos(math.radians(latitude))
    cells: list[GridCell] = []
    for row in range(size):
        for column in range(size):
            lat = round(latitude + (half - row) * degrees_lat, 7)
            lng = round(longitude + (column - half) * degrees_lng, 7)
            if not (-85 <= lat <= 85 and -180 <= lng <= 180):
                # Near a pole or across the antimeridian the square is no longer a square.
                raise GridError("latitude", "the grid reaches beyond ±85° or ±180°")
            cells.append(GridCell(row, column, lat, lng, maps_coordinate(lat, lng, zoom)))
    return cells
