"""Response structs of the position reports (API and dashboard share them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from app.schemas import Schema, Url

Change = Literal["up", "down", "same", "new", "lost", "unranked"]
"""Movement since the device's previous measured run: ``new`` ranks now and did not then,
``lost`` ranked then and not now, ``unranked`` in neither; None when the latest run has no
measurement of the keyword (no data, failed, or not part of that run)."""


class ColumnOut(Schema):
    """One measurement: a request, its time, and the child run of each device it measured."""

    request_id: int
    measured_at: datetime
    runs: dict[str, int]
    """device (or ``keyword_data``) → child run id."""


class CellOut(Schema):
    state: str | None
    """``retrieved``, ``no_data``, ``failed``; None when the keyword was not part of the run."""
    position: int | None


class CompetitorCell(Schema):
    domain: str
    position: int | None
    previous: int | None
    change: Change | None


class PositionRow(Schema):
    keyword: str
    device: str
    state: str | None
    """The latest measured run's state for this keyword."""
    position: int | None
    previous: int | None
    change: Change | None
    delta: int | None
    """Places gained since the previous run (negative: lost places); None unless both ranked."""
    best: int | None
    """The best position over the schedule's whole history."""
    url: str | None
    search_volume: int | None
    """From the latest keyword data of the same list (or the workspace, for a direct selection)."""
    cells: list[CellOut]
    """One per column of the page, oldest first."""
    competitors: list[CompetitorCell] = []
    """Each competitor's position on the same result pages, in the schedule's order."""
    features: list[str] = []
    """The SERP features on the latest page, as the provider's result items name them."""
    owned_features: list[str] = []
    """Features whose item links to the tracked domain (a featured snippet of the site, …)."""
    winnable_features: list[str] = []
    """Features on the page the domain does not own while it ranks in the top 10."""
    target_url: str | None = None
    """The page that should rank, when one is set."""
    url_flags: list[str] = []
    """``other_url``: another page of the domain ranks than the target (cannibalisation);
    ``alternating``: the ranking page changed back and forth within the runs shown."""


class RunSummaryOut(Schema):
    request_id: int
    run_id: int
    device: str
    measured_at: datetime
    measured: int
    """Keywords the run retrieved (found within the depth or not)."""
    ranked: int
    top3: int
    top10: int
    average_position: float | None
    visibility: float | None


class PositionsPage(Schema):
    schedule_id: int
    depth: int
    competitors: list[str]
    columns: list[ColumnOut]
    summaries: list[RunSummaryOut]
    """The per-run figures of the columns' runs."""
    items: list[PositionRow]
    total: int
    """Rows matching the filters (all pages)."""
    next_cursor: str | None


class SummaryPage(Schema):
    items: list[RunSummaryOut]
    """Newest request first."""
    next_cursor: str | None


class CompetitorsIn(Schema):
    domains: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=253)]], msgspec.Meta(max_length=100)
    ]
    """Up to 5 domains (``https://`` and ``www.`` are dropped); an empty list removes them."""


class CompetitorsOut(Schema):
    schedule_id: int
    domains: list[str]


class TargetsIn(Schema):
    targets: Annotated[
        dict[Annotated[str, msgspec.Meta(max_length=700)], Url], msgspec.Meta(max_length=50_000)
    ]
    """keyword → the page of the tracked domain that should rank (replaces the whole set; an
    empty URL leaves the keyword without a target)."""


class TargetsOut(Schema):
    schedule_id: int
    targets: dict[str, str]
