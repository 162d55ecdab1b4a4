"""The simulated provider's locations list (``GET /v3/serp/google/locations[/{country}]``).

Realistic in shape and size: every country of the shipped list (code 2000 + ISO numeric), a set of
real places with the provider's codes and names (Paris ``1006094``, Lyon, Munich, São Paulo,
London, Marseille and their regions), and several thousand generated regions, cities and postal
codes spread over the larger countries, each with its parent's code. The generated names are
deterministic, and some carry accents, so searching without them is exercised. Tests drop or add
locations (:meth:`SimulatedLocations.drop`, :meth:`SimulatedLocations.add`) to see a re-sync.
"""

from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

LOCATIONS_PATH: Final = "/v3/serp/google/locations"

# Real places: (code, name, parent code, ISO country, type). Codes are the provider's (Google Ads
# geo-target ids); the country codes are 2000 + ISO numeric.
_REAL: Final[tuple[tuple[int, str, int | None, str, str], ...]] = (
    (20321, "Ile-de-France,France", 2250, "FR", "Region"),
    (1006094, "Paris,Ile-de-France,France", 20321, "FR", "City"),
    (20327, "Auvergne-Rhone-Alpes,France", 2250, "FR", "Region"),
    (1006167, "Lyon,Auvergne-Rhone-Alpes,France", 20327, "FR", "City"),
    (20326, "Provence-Alpes-Cote d'Azur,France", 2250, "FR", "Region"),
    (1006356, "Marseille,Provence-Alpes-Cote d'Azur,France", 20326, "FR", "City"),
    (9056143, "75001,Ile-de-France,France", 20321, "FR", "Postal Code"),
    (20228, "Bavaria,Germany", 2276, "DE", "Region"),
    (1004234, "Munich,Bavaria,Germany", 20228, "DE", "City"),
    (20227, "Berlin,Germany", 2276, "DE", "Region"),
    (1003854, "Berlin,Berlin,Germany", 20227, "DE", "City"),
    (20230, "North Rhine-Westphalia,Germany", 2276, "DE", "Region"),
    (1004074, "Cologne,North Rhine-Westphalia,Germany", 20230, "DE", "City"),
    (1004063, "Düsseldorf,North Rhine-Westphalia,Germany", 20230, "DE", "City"),
    (20106, "State of São Paulo,Brazil", 2076, "BR", "Region"),
    (1001773, "São Paulo,State of São Paulo,Brazil", 20106, "BR", "City"),
    (20339, "England,United Kingdom", 2826, "GB", "Region"),
    (1006886, "London,England,United Kingdom", 20339, "GB", "City"),
    (20133, "Zurich,Switzerland", 2756, "CH", "Region"),
    (1003297, "Zürich,Zurich,Switzerland", 20133, "CH", "City"),
    (20271, "Catalonia,Spain", 2724, "ES", "Region"),
    (1005424, "Barcelona,Catalonia,Spain", 20271, "ES", "City"),
    (21137, "California,United States", 2840, "US", "State"),
    (1014044, "San Francisco,California,United States", 21137, "US", "City"),
    (
        200807,
        "San Francisco-Oakland-San Jose CA,California,United States",
        21137,
        "US",
        "DMA Region",
    ),
    (9031936, "94103,California,United States", 21137, "US", "Postal Code"),
)

# The countries the generated places are spread over, with letters that make their names look
# local (accents included).
_COUNTRIES: Final = {
    "US": "abcdefghiklmnoprstuvwy",
    "GB": "abcdefghiklmnoprstuwy",
    "FR": "abcdeéèfghilmnoprstuvy",
    "DE": "abcdefghiklmnoprstuwzäöü",
    "ES": "abcdefgilmnoprstuvñá",
    "IT": "abcdefgilmnoprstuvz",
    "BR": "abcdefgilmnoprstuvãçé",
    "PT": "abcdefgilmnoprstuvãçõ",
    "NL": "abcdefghijklmnoprstuvwz",
    "PL": "abcdefghijklmnoprstuwyzłóż",
    "SE": "abdefghijklmnoprstuvåäö",
    "CA": "abcdefghiklmnoprstuvwy",
    "AU": "abcdefghiklmnoprstuwy",
    "IN": "abdeghijklmnoprstuvy",
    "MX": "abcdefgilmnoprstuvñ",
    "TR": "abcdefghiklmnoprstuvyzçğşü",
    "JP": "abdeghikmnorstuyz",
    "CH": "abcdefghiklmnoprstuwzäöüé",
}
REGIONS_PER_COUNTRY: Final = 12
CITIES_PER_REGION: Final = 14
POSTCODES_PER_REGION: Final = 6


@dataclass(frozen=True, slots=True)
class SimLocation:
    code: int
    name: str
    parent: int | None
    country_iso: str
    kind: str

    def wire(self) -> dict[str, Any]:
        return {
            "location_code": self.code,
            "location_name": self.name,
            "location_code_parent": self.parent,
            "country_iso_code": self.country_iso,
            "location_type": self.kind,
        }


def _countries() -> list[SimLocation]:
    text = resources.files("app.engines.ranktracking.data").joinpath("locations.csv").read_text()
    return [
        SimLocation(
            int(r["location_code"]), r["location_name"], None, r["country_iso_code"], "Country"
        )
        for r in csv.DictReader(io.StringIO(text))
        if r["location_type"] == "Country"
    ]


def _word(rng: random.Random, letters: str) -> str:
    vowels = [c for c in letters if c in "aeiouyáãåäéèõóöü"]
    consonants = [c for c in letters if c not in vowels]
    syllables = [rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4))]
    return "".join(syllables).capitalize()


@cache
def default_locations() -> tuple[SimLocation, ...]:
    """The full list: countries, the real places, then the generated ones (deterministic)."""
    countries = {c.country_iso: c for c in _countries()}
    rows: list[SimLocation] = list(countries.values())
    rows += [SimLocation(*real) for real in _REAL]
    taken = {r.code for r in rows}
    rng = random.Random(1006094)
    region_code, city_code, postcode = 21500, 1100000, 9500000
    for iso, letters in _COUNTRIES.items():
        country = countries[iso]
        for _ in range(REGIONS_PER_COUNTRY):
            region_code += 1
            region = _word(rng, letters)
            rows.append(
                SimLocation(region_code, f"{region},{country.name}", country.code, iso, "Region")
            )
            for _ in range(CITIES_PER_REGION):
                city_code += 1
                name = f"{_word(rng, letters)},{region},{country.name}"
                rows.append(SimLocation(city_code, name, region_code, iso, "City"))
            for _ in range(POSTCODES_PER_REGION):
                postcode += 1
                name = f"{rng.randint(10000, 99999)},{region},{country.name}"
                rows.append(SimLocation(postcode, name, region_code, iso, "Postal Code"))
    assert not taken & {r.code for r in rows[len(taken) :]}, "a generated code collides"
    return tuple(rows)


class SimulatedLocations:
    """The list the simulator serves now; tests change it to see what a re-sync does."""

    def __init__(self) -> None:
        self._rows = {r.code: r for r in default_locations()}

    def drop(self, code: int) -> None:
        """The provider stops listing ``code``."""
        del self._rows[code]

    def add(self, code: int, name: str, parent: int | None, country_iso: str, kind: str) -> None:
        self._rows[code] = SimLocation(code, name, parent, country_iso, kind)

    def __len__(self) -> int:
        return len(self._rows)

    def result(self, country_iso: str | None) -> list[dict[str, Any]]:
        wanted = country_iso.upper() if country_iso else None
        return [r.wire() for r in self._rows.values() if wanted in (None, r.country_iso)]
