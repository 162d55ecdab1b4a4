"""The geo-grid API's shapes (RT-121..RT-127)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from app.engines.ranktracking.local.models import MAPS
from app.engines.ranktracking.schemas import DomainInput


def _text(limit: int) -> msgspec.Meta:
    """As long as its column holds; what a valid value is, the checks in :mod:`.scans` say."""
    return msgspec.Meta(max_length=limit)


_Whole = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
"""A grid's size, spacing or zoom: bounded here, its own range checked (and named) in
:mod:`.geogrid`."""


class GeoGridIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A scan to run now: the keyword, the business (at least one of its identifiers), the
    grid's centre, size (3, 5, 7 or 9), spacing in metres and map zoom, and the engine."""

    keyword: Annotated[str, _text(200)]
    latitude: float
    longitude: float
    business_name: Annotated[str, _text(200)] | None = None
    place_id: Annotated[str, _text(200)] | None = None
    cid: Annotated[str, _text(40)] | None = None
    domain: DomainInput | None = None
    size: _Whole = 5
    spacing_m: _Whole = 500
    zoom: _Whole = 15
    engine: Annotated[str, _text(16)] = MAPS
    language_code: Annotated[str, _text(8)] = "en"
    queue: Annotated[str, _text(16)] = "standard"


class GeoGridEstimateOut(msgspec.Struct, kw_only=True):
    cells: int
    estimate_micros: int
    estimate_eur: str
    available_micros: int


class GeoGridCompetitorOut(msgspec.Struct, kw_only=True):
    rank: int
    title: str
    domain: str | None


class GeoGridCellOut(msgspec.Struct, kw_only=True):
    row: int
    column: int
    latitude: float
    longitude: float
    state: str
    rank: int | None
    competitors: list[GeoGridCompetitorOut]


class GeoGridOut(msgspec.Struct, kw_only=True):
    id: int
    keyword: str
    engine: str
    language_code: str
    business_name: str | None
    place_id: str | None
    cid: str | None
    domain: str | None
    latitude: float
    longitude: float
    size: int
    spacing_m: int
    zoom: int
    depth: int
    queue: str
    status: str
    reserved_micros: int
    settled_micros: int | None
    provider_cost: str | None
    error_message: str | None
    average_rank: float | None
    """The mean rank over the cells where the business is listed (None: listed nowhere)."""
    found_cells: int
    top3_share: float
    """The share of read cells where the business is in the top 3 (0 to 1)."""
    created_at: datetime
    finished_at: datetime | None
    cells: list[GeoGridCellOut] | None = None


class GeoGridList(msgspec.Struct, kw_only=True):
    items: list[GeoGridOut]
