"""The Google Maps part of the SERP simulator (``/v3/serp/google/maps``): task validation and the
``task_get/advanced`` page, in the provider's documented shapes.

A Maps task is searched from a ``location_code`` or a ``location_coordinate``
(``"latitude,longitude,zoom"``, the zoom written ``3z`` to ``21z``). Its page lists businesses as
``maps_search`` items (``title``, ``place_id``, ``cid``, ``domain``, ``url``, ``rating``,
``latitude``/``longitude``, …) ranked by ``rank_group``/``rank_absolute``. Each (keyword,
location) has 20 seeded businesses; tests place a business of their own at a position, or
nowhere, for a keyword (:class:`MapsPlacement`). A placement with a location of its own drops
one place every ``DRIFT_M`` metres the search is made from away from it, and leaves the page
past the 20th, so a geo-grid around it shows a gradient.

The Local Finder (``/v3/serp/google/local_finder``) takes the same parameters (default depth
20, one billed desktop SERP) and lists the same businesses as ``local_pack`` items (``title``,
``domain``, ``url``, ``rating``, ``place_id``, ``cid``, …).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass
from typing import Any, Final

MAPS_PREFIX: Final = "/v3/serp/google/maps"
LOCAL_FINDER_PREFIX: Final = "/v3/serp/google/local_finder"
LOCAL_FINDER_DEPTH: Final = 20
DRIFT_M: Final = 400
"""A located placement loses one place per this many metres of distance."""
MAPS_RESULTS: Final = 20
MAX_MAPS_DEPTH: Final = 700
_COORDINATE = re.compile(r"^(-?\d{1,2}(?:\.\d{1,7})?),(-?\d{1,3}(?:\.\d{1,7})?),(\d{1,2})z$")
_NAMES: Final = (  # noqa: SIM905 - a word list reads better as one string
    "Atlas Bright Cedar Delta Ember Falcon Garden Harbor Indigo Juniper Maple Orbit Summit Willow"
).split()
_KINDS: Final = ("Bakery", "Café", "Studio", "Store", "Bistro", "Workshop", "House")


@dataclass(frozen=True)
class MapsPlacement:
    """A business a test puts on the Maps pages of one keyword: at ``position`` (1–20), or
    nowhere (``None``)."""

    title: str
    position: int | None
    place_id: str
    cid: str
    domain: str | None = None
    latitude: float | None = None
    longitude: float | None = None

    def position_from(self, latitude: float, longitude: float) -> int | None:
        """Its position on a page searched from (``latitude``, ``longitude``)."""
        if self.position is None or self.latitude is None or self.longitude is None:
            return self.position
        drift = int(_metres(self.latitude, self.longitude, latitude, longitude) // DRIFT_M)
        moved = self.position + drift
        return moved if moved <= MAPS_RESULTS else None


def _metres(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    la1, lo1, la2, lo2 = map(math.radians, (lat1, lng1, lat2, lng2))
    h = (
        math.sin((la2 - la1) / 2) ** 2
        + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    )
    return 2 * 6_371_008.8 * math.asin(math.sqrt(h))


def local_serps(endpoint: str, depth: int, device: str) -> int:
    """The SERPs a Maps or Local Finder task is billed for: the provider bills a Maps SERP per
    100 desktop (20 mobile) results and a Local Finder SERP per 20 desktop (10 mobile)."""
    if endpoint == "local_finder":
        per = 20 if device == "desktop" else 10
    else:
        per = 100 if device == "desktop" else 20
    return max(1, math.ceil(depth / per))


def validate_maps(
    item: Any, languages: frozenset[str], *, default_depth: int = 100
) -> tuple[dict[str, Any], str | None]:
    """The stored parameters of a posted Maps (or Local Finder, ``default_depth`` 20) task, and
    the ``Invalid Field`` message of the first bad one (``None`` when it is valid)."""
    if not isinstance(item, dict):
        return {}, "Invalid Field: 'task'."
    data: dict[str, Any] = {
        key: item[key]
        for key in ("location_code", "location_coordinate", "language_code", "tag")
        if key in item
    }
    keyword, device = item.get("keyword"), item.get("device", "desktop")
    depth, priority = item.get("depth", default_depth), item.get("priority", 1)
    data.update(keyword=keyword, device=device, depth=depth, priority=priority)
    data.update(se_domain="google.com", os="windows" if device == "desktop" else "android")
    coordinate, location = item.get("location_coordinate"), item.get("location_code")
    if coordinate is not None:
        if not isinstance(coordinate, str) or not _valid_coordinate(coordinate):
            return data, "Invalid Field: 'location_coordinate'."
    elif not isinstance(location, int) or isinstance(location, bool) or location <= 0:
        return data, "Invalid Field: 'location_code'."
    if item.get("language_code") not in languages:
        return data, "Invalid Field: 'language_code'."
    tag = item.get("tag")
    if tag is not None and (not isinstance(tag, str) or len(tag) > 255):
        return data, "Invalid Field: 'tag'."
    if not isinstance(keyword, str) or not keyword.strip() or len(keyword) > 700:
        return data, "Invalid Field: 'keyword'."
    if device not in ("desktop", "mobile"):
        return data, "Invalid Field: 'device'."
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_MAPS_DEPTH:
        return data, "Invalid Field: 'depth'."
    if priority not in (1, 2):
        return data, "Invalid Field: 'priority'."
    return data, None


def _valid_coordinate(text: str) -> bool:
    match = _COORDINATE.match(text)
    if match is None:
        return False
    latitude, longitude, zoom = float(match[1]), float(match[2]), int(match[3])
    return -90 <= latitude <= 90 and -180 <= longitude <= 180 and 3 <= zoom <= 21


def maps_items(
    seed: int,
    data: dict[str, Any],
    keyword_key: str,
    placements: list[MapsPlacement],
    *,
    local_finder: bool = False,
) -> list[dict[str, Any]]:
    """The items of a task's page (``maps_search``, or ``local_pack`` on the Local Finder): 20
    seeded businesses with the placed ones inserted at their positions (as seen from where the
    task searches), cut to the task's depth."""
    where = str(data.get("location_coordinate") or data.get("location_code"))
    rng = random.Random(f"{seed}|maps|{keyword_key}|{where}")
    placed = {p.place_id for p in placements}
    seeded: list[MapsPlacement] = []
    while len(seeded) < MAPS_RESULTS:
        title = f"{rng.choice(_NAMES)} {rng.choice(_KINDS)} {rng.randint(1, 99)}"
        digest = hashlib.sha256(f"{seed}|{title}".encode()).hexdigest()
        place_id = "ChIJ" + digest[:23]
        if place_id in placed or any(s.place_id == place_id for s in seeded):
            continue
        domain = (
            f"{title.split()[0].lower()}{title.split()[-1]}.com" if rng.random() < 0.7 else None
        )
        seeded.append(MapsPlacement(title, None, place_id, str(int(digest[23:39], 16)), domain))
    latitude, longitude = _centre(data)
    seen = sorted(
        (
            (position, placement)
            for placement in placements
            if (position := placement.position_from(latitude, longitude)) is not None
        ),
        key=lambda pair: pair[0],
    )
    ordered = list(seeded)
    for position, placement in seen:
        ordered.insert(position - 1, placement)
    shown = ordered[:MAPS_RESULTS][: int(data["depth"])]
    if local_finder:
        return [_local_pack_item(b, rank, rng) for rank, b in enumerate(shown, start=1)]
    return [_item(b, rank, latitude, longitude, rng) for rank, b in enumerate(shown, start=1)]


def _centre(data: dict[str, Any]) -> tuple[float, float]:
    coordinate = data.get("location_coordinate")
    if isinstance(coordinate, str) and (match := _COORDINATE.match(coordinate)):
        return float(match[1]), float(match[2])
    return 48.8566, 2.3522


def _item(
    business: MapsPlacement, rank: int, latitude: float, longitude: float, rng: random.Random
) -> dict[str, Any]:
    return {
        "type": "maps_search",
        "rank_group": rank,
        "rank_absolute": rank,
        "domain": business.domain,
        "title": business.title,
        "url": f"https://{business.domain}/" if business.domain else None,
        "contact_url": None,
        "contributor_url": None,
        "rating": {
            "rating_type": "Max5",
            "value": round(3.5 + rng.random() * 1.5, 1),
            "votes_count": rng.randint(3, 900),
            "rating_max": None,
        },
        "hotel_rating": None,
        "price_level": None,
        "rating_distribution": None,
        "snippet": None,
        "address": f"{rank} Rue du Marché",
        "address_info": None,
        "place_id": business.place_id,
        "phone": None,
        "main_image": None,
        "total_photos": None,
        "category": next((k for k in _KINDS if k in business.title), "Point of interest"),
        "additional_categories": None,
        "category_ids": None,
        "work_hours": None,
        "feature_id": f"0x{business.cid[:8]}:0x{business.cid[-8:]}",
        "cid": business.cid,
        "latitude": round(latitude + rng.uniform(-0.01, 0.01), 7),
        "longitude": round(longitude + rng.uniform(-0.01, 0.01), 7),
        "is_claimed": rng.random() < 0.8,
        "local_justifications": None,
        "is_directory_item": False,
    }


def _local_pack_item(business: MapsPlacement, rank: int, rng: random.Random) -> dict[str, Any]:
    """A Local Finder ``local_pack`` item, in the provider's documented shape."""
    return {
        "type": "local_pack",
        "rank_group": rank,
        "rank_absolute": rank,
        "position": "left",
        "xpath": f"/html[1]/body[1]/div[{rank}]",
        "title": business.title,
        "description": None,
        "domain": business.domain,
        "phone": None,
        "url": f"https://{business.domain}/" if business.domain else None,
        "is_paid": False,
        "rating": {
            "rating_type": "Max5",
            "value": round(3.5 + rng.random() * 1.5, 1),
            "votes_count": rng.randint(3, 900),
            "rating_max": 5,
        },
        "place_id": business.place_id,
        "cid": business.cid,
    }


def maps_page(
    data: dict[str, Any], items: list[dict[str, Any]], posted: str, *, local_finder: bool = False
) -> dict[str, Any]:
    """The ``result[0]`` of a Maps (or Local Finder) ``task_get/advanced`` answer."""
    kind = "local_finder" if local_finder else "maps"
    return {
        "keyword": data["keyword"],
        "type": kind,
        "se_domain": "google.com",
        "location_code": data.get("location_code"),
        "language_code": data["language_code"],
        "check_url": (
            "https://www.google.com/search?tbm=lcl&q="
            if local_finder
            else "https://www.google.com/maps/search/"
        )
        + str(data["keyword"]).replace(" ", "+"),
        "datetime": posted,
        "spell": None,
        "item_types": ["local_pack" if local_finder else "maps_search"],
        "se_results_count": 0,
        "items_count": len(items),
        "items": items,
    }
