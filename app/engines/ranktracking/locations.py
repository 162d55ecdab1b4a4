"""The provider's locations (DataForSEO ``/v3/serp/google/locations``), shipped as package data.

``data/locations.csv`` holds every country — DataForSEO's country code is 2000 + the ISO 3166-1
numeric code (2840 United States, 2276 Germany) — and the cities whose codes were checked against
the provider's published list (a city's code is its Google Ads geo-target id, e.g. 1006886
London). Russia and Belarus are absent: the provider no longer serves any location there. A
schedule's ``location_code`` must be one of these rows, so a typo is refused at creation instead of
failing every task at the provider with ``40501``.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources

MAX_LOCATION_CODE = 2**31 - 1
"""The column is a 32-bit integer; anything larger is refused before it reaches the database."""


@dataclass(frozen=True, slots=True)
class Location:
    code: int
    name: str
    """The provider's full name, e.g. ``London,England,United Kingdom``."""
    country_iso: str
    kind: str
    """``Country`` or ``City``."""
    parent: int | None


@cache
def _table() -> dict[int, Location]:
    text = resources.files("app.engines.ranktracking.data").joinpath("locations.csv").read_text()
    rows: dict[int, Location] = {}
    for row in csv.DictReader(io.StringIO(text)):
        code = int(row["location_code"])
        parent = row["location_code_parent"]
        rows[code] = Location(
            code=code,
            name=row["location_name"],
            country_iso=row["country_iso_code"],
            kind=row["location_type"],
            parent=int(parent) if parent else None,
        )
    return rows


def get(code: int) -> Location | None:
    return _table().get(code)


def all_locations() -> list[Location]:
    return list(_table().values())


def _fold(text: str) -> str:
    """Lower case without accents, so "cote" finds "Côte" and "zurich" finds "Zürich"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def search(query: str, *, limit: int = 20) -> list[Location]:
    """Locations whose name (or ISO country code, or code) matches ``query``: names starting with
    it first, then names containing it; countries before cities."""
    wanted = _fold(query.strip())
    if not wanted:
        return []
    starts: list[Location] = []
    contains: list[Location] = []
    for location in _table().values():
        name = _fold(location.name)
        if name.startswith(wanted) or wanted in (
            location.country_iso.casefold(),
            str(location.code),
        ):
            starts.append(location)
        elif wanted in name:
            contains.append(location)
    ranked = sorted(starts, key=_rank) + sorted(contains, key=_rank)
    return ranked[:limit]


def _rank(location: Location) -> tuple[int, str]:
    return (0 if location.kind == "Country" else 1, location.name)
