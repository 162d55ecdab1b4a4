"""Google Local Finder SERP tasks of the provider (``/v3/serp/google/local_finder``): the list
behind a search's "More places" link.

A Local Finder task is posted like a Maps one (``task_post``, at most 100 a call, billed once
when it is created, from a ``location_code`` or a ``"latitude,longitude,zoom"``
``location_coordinate``) and read from ``task_get/advanced/{id}``, whose page holds
``local_pack`` items: one business each, with ``rank_group``/``rank_absolute``, ``title``,
``domain``, ``place_id`` and ``cid``. The provider bills a Local Finder SERP per 20 results on
desktop (10 on mobile), so the default depth of 20 is one billed page.
"""

from __future__ import annotations

from typing import Final

from app.integrations.serp.maps import MapsTaskResult, WireMapsResult, maps_result
from app.integrations.serp.wire import WireTask

LOCAL_FINDER_PATH: Final = "/v3/serp/google/local_finder"
LOCAL_FINDER_ITEM: Final = "local_pack"
LOCAL_FINDER_DEPTH: Final = 20
"""The provider's default depth, and the results one billed desktop SERP covers."""
MAX_LOCAL_FINDER_DEPTH: Final = 700


def local_finder_result(task: WireTask[WireMapsResult], task_id: str = "") -> MapsTaskResult:
    """The Local Finder result of ``task``: its ``local_pack`` businesses, best first."""
    return maps_result(task, task_id, item_type=LOCAL_FINDER_ITEM)
