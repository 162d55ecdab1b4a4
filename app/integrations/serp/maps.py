"""Google Maps SERP tasks of the provider (``/v3/serp/google/maps``): what is posted, what comes
back, and the ``location_coordinate`` a task is searched from.

A Maps task is posted like an organic one (``task_post``, at most 100 a call, billed once when it
is created) and read from ``task_get/advanced/{id}``, whose page holds ``maps_search`` items: one
business each, ranked by ``rank_group``/``rank_absolute``, named by ``title`` and identified by
``place_id`` and ``cid`` (``domain`` is its website's, when it has one).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Final

import msgspec

from app.integrations.serp.codes import TaskState, task_state
from app.integrations.serp.wire import WireTask

MAPS_PATH: Final = "/v3/serp/google/maps"
MAX_MAPS_DEPTH: Final = 700
MIN_ZOOM, MAX_ZOOM = 3, 21


def maps_coordinate(latitude: float, longitude: float, zoom: int) -> str:
    """The provider's ``location_coordinate`` of a Maps task: ``"latitude,longitude,zoom"`` with
    the zoom written ``17z`` and the coordinates to 7 decimals (its documented precision).
    A value out of range raises ``ValueError`` naming it."""
    if not (math.isfinite(latitude) and -90 <= latitude <= 90):
        raise ValueError("latitude must be between -90 and 90")
    if not (math.isfinite(longitude) and -180 <= longitude <= 180):
        raise ValueError("longitude must be between -180 and 180")
    if not MIN_ZOOM <= zoom <= MAX_ZOOM:
        raise ValueError(f"zoom must be between {MIN_ZOOM} and {MAX_ZOOM}")
    return f"{latitude:.7f},{longitude:.7f},{zoom}z"


class MapsTask(msgspec.Struct, frozen=True, kw_only=True):
    """One Maps search to queue: from ``location_coordinate`` (a point and zoom, see
    :func:`maps_coordinate`) or else ``location_code``."""

    tag: str
    keyword: str
    language_code: str
    location_code: int | None = None
    location_coordinate: str | None = None
    device: str = "desktop"
    depth: int = 100
    priority: int = 1


class MapsListing(msgspec.Struct, frozen=True):
    """One business on a Maps page."""

    rank_group: int
    rank_absolute: int
    title: str
    place_id: str | None = None
    cid: str | None = None
    domain: str | None = None
    url: str | None = None
    latitude: float | None = None
    longitude: float | None = None


class MapsTaskResult(msgspec.Struct, frozen=True):
    """A fetched Maps task; ``state`` as for organic tasks (``ok``, ``in_queue``,
    ``no_results``, ``error``)."""

    task_id: str
    tag: str
    status_code: int
    state: TaskState
    keyword: str
    listings: list[MapsListing]
    cost: Decimal
    status_message: str = ""


class WireMapsItem(msgspec.Struct):
    type: str
    rank_group: int
    rank_absolute: int
    title: str | None = None
    place_id: str | None = None
    cid: str | None = None
    domain: str | None = None
    url: str | None = None
    latitude: float | None = None
    longitude: float | None = None


class WireMapsResult(msgspec.Struct):
    keyword: str = ""
    items: list[WireMapsItem] | None = None


def maps_body(task: MapsTask) -> dict[str, object]:
    body: dict[str, object] = {
        "keyword": task.keyword,
        "language_code": task.language_code,
        "device": task.device,
        "depth": task.depth,
        "priority": task.priority,
        "tag": task.tag,
    }
    if task.location_coordinate is not None:
        body["location_coordinate"] = task.location_coordinate
    else:
        body["location_code"] = task.location_code
    return body


def maps_result(
    task: WireTask[WireMapsResult], task_id: str = "", *, item_type: str = "maps_search"
) -> MapsTaskResult:
    """The Maps result of ``task``: its ``item_type`` items (``maps_search`` on Maps,
    ``local_pack`` on the Local Finder), best first; other item types carry no business."""
    page = task.result[0] if task.result else None
    items = (page.items or []) if page else []
    listings = sorted(
        (
            MapsListing(
                rank_group=item.rank_group,
                rank_absolute=item.rank_absolute,
                title=item.title or "",
                place_id=item.place_id,
                cid=item.cid,
                domain=item.domain,
                url=item.url,
                latitude=item.latitude,
                longitude=item.longitude,
            )
            for item in items
            if item.type == item_type
        ),
        key=lambda listing: listing.rank_absolute,
    )
    return MapsTaskResult(
        task_id=task.id or task_id,
        tag=task.data_str("tag"),
        status_code=task.status_code,
        state=task_state(task.status_code),
        keyword=page.keyword if page and page.keyword else task.data_str("keyword"),
        listings=listings,
        cost=task.cost or Decimal(0),
        status_message=task.status_message,
    )
