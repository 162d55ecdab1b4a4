"""The provider's locations (DataForSEO ``/v3/serp/google/locations``): looked up, named and
searched from the synced table (RT-60, :mod:`.location_sync`), or from the shipped list until the
first sync.

``data/locations.csv`` holds every country — DataForSEO's country code is 2000 + the ISO 3166-1
numeric code (2840 United States, 2276 Germany) — and a few cities whose codes were checked against
the provider's published list. It answers before the provider's list was ever synced (a fresh
install without the provider reachable); once synced, the table is the truth: tens of thousands of
regions, cities and postal codes, and the locations the provider dropped, kept with a mark.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from sqlalchemy import case, func, literal, or_, select

from app.db.session import ReadSession
from app.engines.ranktracking.location_models import ProviderLocation
from app.errors import ValidationFailed

MAX_LOCATION_CODE = 2**31 - 1
"""The column is a 32-bit integer; anything larger is refused before it reaches the database."""

# The provider names places in English; people also type their local names. Each local name
# (folded) is added to the searchable text of every location whose name has the English part, so
# "munchen" finds "Munich,Bavaria,Germany" (RT-62).
LOCAL_NAMES: dict[str, tuple[str, ...]] = {
    "munich": ("münchen",),
    "bavaria": ("bayern",),
    "cologne": ("köln",),
    "germany": ("deutschland",),
    "vienna": ("wien",),
    "austria": ("österreich",),
    "rome": ("roma",),
    "milan": ("milano",),
    "naples": ("napoli",),
    "florence": ("firenze",),
    "turin": ("torino",),
    "venice": ("venezia",),
    "italy": ("italia",),
    "lisbon": ("lisboa",),
    "seville": ("sevilla",),
    "spain": ("españa",),
    "brussels": ("bruxelles", "brussel"),
    "antwerp": ("antwerpen", "anvers"),
    "the hague": ("den haag",),
    "netherlands": ("nederland",),
    "geneva": ("genève", "genf"),
    "zurich": ("zürich",),
    "switzerland": ("schweiz", "suisse", "svizzera"),
    "prague": ("praha",),
    "warsaw": ("warszawa",),
    "krakow": ("kraków",),
    "copenhagen": ("københavn",),
    "gothenburg": ("göteborg",),
    "athens": ("athína",),
    "bucharest": ("bucurești",),
    "belgrade": ("beograd",),
    "moscow": ("moskva",),
    "kyiv": ("kiev", "kyjiw"),
    "france": ("frankreich", "francia"),
    "brazil": ("brasil",),
    "mexico city": ("ciudad de méxico",),
}


@dataclass(frozen=True, slots=True)
class Location:
    code: int
    name: str
    """The provider's full name, e.g. ``Paris,Ile-de-France,France``."""
    country_iso: str
    kind: str
    """The provider's type: ``Country``, ``Region``, ``City``, ``Postal Code``, ``DMA Region``…"""
    parent: int | None
    dropped: bool = False
    """The provider no longer lists it: schedules using it keep running, with a warning."""


def fold(text: str) -> str:
    """Lower case without accents, so "cote" finds "Côte" and "zurich" finds "Zürich"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def search_text(name: str) -> str:
    """What a search matches: the folded name, then the local names of its parts."""
    folded = fold(name)
    extra = [
        fold(local) for part in folded.split(",") for local in LOCAL_NAMES.get(part.strip(), ())
    ]
    return " | ".join([folded, *extra])


# -- the shipped list (before the first sync) -----------------------------------------------------


@cache
def _shipped() -> dict[int, Location]:
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


def shipped(code: int) -> Location | None:
    return _shipped().get(code)


def countries() -> list[Location]:
    """Every country, by name (the wizard's first options)."""
    return sorted((c for c in _shipped().values() if c.kind == "Country"), key=lambda c: c.name)


def _shipped_search(wanted: str, limit: int) -> list[Location]:
    starts: list[Location] = []
    contains: list[Location] = []
    for location in _shipped().values():
        text = search_text(location.name)
        if text.startswith(wanted) or wanted in (
            location.country_iso.casefold(),
            str(location.code),
        ):
            starts.append(location)
        elif wanted in text:
            contains.append(location)
    ranked = sorted(starts, key=_rank) + sorted(contains, key=_rank)
    return ranked[:limit]


def _rank(location: Location) -> tuple[int, str]:
    return (0 if location.kind == "Country" else 1, location.name)


# -- the synced table ------------------------------------------------------------------------------


def _of(row: ProviderLocation) -> Location:
    return Location(
        code=row.code,
        name=row.name,
        country_iso=row.country_iso or "",
        kind=row.kind,
        parent=row.parent_code,
        dropped=row.dropped_at is not None,
    )


async def is_synced(session: ReadSession) -> bool:
    """Whether the provider's list was synced at least once (the table is then the truth)."""
    return (await session.execute(select(ProviderLocation.code).limit(1))).first() is not None


async def get(session: ReadSession, code: int) -> Location | None:
    """The location of ``code`` (a dropped one too), or None when the provider never listed it."""
    if not 0 < code <= MAX_LOCATION_CODE:
        return None
    row = await session.get(ProviderLocation, code)
    if row is not None:
        return _of(row)
    if await is_synced(session):
        return None
    return shipped(code)


async def named(session: ReadSession, codes: Iterable[int | None]) -> dict[int, Location]:
    """The locations of ``codes`` that are known, for showing names beside codes."""
    wanted = {c for c in codes if c is not None and 0 < c <= MAX_LOCATION_CODE}
    if not wanted:
        return {}
    rows = (
        await session.execute(select(ProviderLocation).where(ProviderLocation.code.in_(wanted)))
    ).scalars()
    found = {row.code: _of(row) for row in rows}
    for code in wanted - found.keys():
        location = shipped(code)
        if location is not None:
            found[code] = location
    return found


async def shown(session: ReadSession, code: int | None) -> Location | None:
    """The location shown for a schedule's code: the synced row (a dropped one too), else the
    shipped list's, so a code the synced table lacks still reads by its name, never as a bare
    number; None only for a code neither knows. (``get`` is stricter: it answers what may be
    chosen now.)"""
    if code is None:
        return None
    return (await named(session, [code])).get(code)


async def name_of(session: ReadSession, code: int | None) -> str | None:
    """The name shown for a schedule's location: the provider's name, or None when unknown."""
    location = await shown(session, code)
    return location.name if location else None


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def search(session: ReadSession, query: str, *, limit: int = 20) -> list[Location]:
    """Locations the provider lists now whose name (or a local name of it, or the ISO country
    code, or the code) matches ``query``, case and accents ignored: names starting with it first,
    then countries before regions before the rest, shorter names first."""
    wanted = fold(" ".join(query.split()))
    if not wanted:
        return []
    if not await is_synced(session):
        return _shipped_search(wanted, limit)
    pattern = _like_escaped(wanted)
    text = ProviderLocation.search_text
    matches = [
        text.like(f"%{pattern}%", escape="\\"),
        func.lower(func.coalesce(ProviderLocation.country_iso, literal(""))) == wanted,
    ]
    if wanted.isdigit() and int(wanted) <= MAX_LOCATION_CODE:
        matches.append(ProviderLocation.code == int(wanted))
    statement = (
        select(ProviderLocation)
        .where(ProviderLocation.dropped_at.is_(None), or_(*matches))
        .order_by(
            case((text.like(f"{pattern}%", escape="\\"), 0), else_=1),
            case(
                (ProviderLocation.kind == "Country", 0),
                (ProviderLocation.kind.in_(("Region", "State")), 1),
                (ProviderLocation.kind == "City", 2),
                else_=3,
            ),
            func.length(ProviderLocation.name),
            ProviderLocation.name,
        )
        .limit(limit)
    )
    return [_of(row) for row in (await session.execute(statement)).scalars()]


RESOLVE_CANDIDATES = 5


async def resolve(session: ReadSession, typed: str) -> int:
    """The code of the location a person typed by name (``Paris``, ``paris, france``, ``München``,
    the provider's full name) or by code. One match, or one whose name (or its first part) is
    exactly what was typed, resolves; otherwise a :class:`ValidationFailed` on ``location_code``
    says there is none, or lists the candidates to pick from."""
    text = " ".join(typed.split())
    if text.isdigit():
        return int(text)
    if not text:
        raise ValidationFailed.field("location_code", "choose a location")
    found = await search(session, text, limit=50)
    if not found:
        # "paris, france" → the parts each appear in the provider's comma-separated name.
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if len(parts) > 1:
            found = [
                loc
                for loc in await search(session, parts[0], limit=200)
                if all(fold(p) in search_text(loc.name) for p in parts[1:])
            ]
    if not found:
        raise ValidationFailed.field(
            "location_code", f"no location is called “{text}”; pick one from the list"
        )
    wanted = fold(text)
    exact = [
        loc
        for loc in found
        if fold(loc.name) == wanted or _first_part(loc) == wanted or wanted in _local(loc)
    ]
    if len(found) == 1:
        return found[0].code
    if len(exact) == 1:
        return exact[0].code
    choices = "; ".join(f"{loc.name} ({loc.code})" for loc in (exact or found)[:RESOLVE_CANDIDATES])
    raise ValidationFailed.field(
        "location_code", f"“{text}” matches several locations: {choices}; pick one from the list"
    )


def _first_part(location: Location) -> str:
    return fold(location.name.split(",")[0].strip())


def _local(location: Location) -> set[str]:
    return {fold(n) for n in LOCAL_NAMES.get(_first_part(location), ())}
