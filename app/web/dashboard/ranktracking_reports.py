"""The schedule page's positions table: the page's query string as a table query (a band select
stands for the API's ``in_top`` / ``out_of_top``), links that sort by a column, and the summary rows
of average position and visibility per device."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import msgspec
from litestar import Response, get, post
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect

from app.engines.ranktracking import locations
from app.engines.ranktracking.reports import export
from app.engines.ranktracking.reports.competitors import set_competitors
from app.engines.ranktracking.reports.positions import DEFAULT_COLUMNS, TableQuery
from app.engines.ranktracking.reports.schemas import PositionsPage
from app.engines.ranktracking.reports.targets import set_targets
from app.engines.ranktracking.schedules import lookup
from app.engines.ranktracking.wording import counted
from app.errors import DomainError
from app.web.api.ranktracking_reports import csv_response
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Writes

PREFIX = "/ui/ranktracking/schedules/{schedule_id:int}"

PAGE_ROWS = 100
FEATURE_FILTERS = [
    ("", "any SERP features"),
    ("owned", "features we own"),
    ("winnable", "features we could win"),
]
BANDS = [
    ("", "all positions"),
    ("in_top:3", "in the top 3"),
    ("in_top:10", "in the top 10"),
    ("in_top:100", "in the top 100"),
    ("out_of_top:3", "outside the top 3"),
    ("out_of_top:10", "outside the top 10"),
    ("out_of_top:100", "outside the top 100"),
]


@dataclass(frozen=True, slots=True)
class TableParams:
    """The table's query-string values as the browser sends them (all text)."""

    device: str = ""
    moved: str = ""
    band: str = ""
    q: str = ""
    sort: str = "keyword"
    order: str = "asc"
    columns: str = ""
    page: str = ""
    features: str = ""
    url_issues: str = ""
    tag: str = ""

    def query(self) -> TableQuery:
        in_top = out_of_top = None
        kind, _, size = self.band.partition(":")
        if kind in ("in_top", "out_of_top") and size.isdigit():
            in_top, out_of_top = (int(size), None) if kind == "in_top" else (None, int(size))
        moved = int(self.moved) if self.moved.strip().isdigit() else None
        columns = int(self.columns) if self.columns.isdigit() else DEFAULT_COLUMNS
        return TableQuery(
            device=self.device or None,
            moved=moved,
            in_top=in_top,
            out_of_top=out_of_top,
            sort=self.sort,
            order=self.order,
            columns=columns,
            cursor=self.page or None,
            limit=PAGE_ROWS,
            search=" ".join(self.q.split()).casefold() or None,
            features=self.features or None,
            url_issues=bool(self.url_issues),
            tag=self.tag or None,
        )

    def values(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if getattr(self, k)}

    def query_string(self, **changes: str) -> str:
        """This table's query string with ``changes`` (an empty value drops the parameter)."""
        values = {**self.values(), **changes}
        return "?" + urlencode({k: v for k, v in values.items() if v})

    def link(self, **changes: str) -> str:
        return self.query_string(**changes) + "#rt-positions"

    def sort_link(self, key: str) -> str:
        order = "desc" if self.sort == key and self.order == "asc" else "asc"
        return self.link(sort=key, order=order, page="")

    def aria_sort(self, key: str) -> str:
        if self.sort != key:
            return "none"
        return "ascending" if self.order == "asc" else "descending"


def summary_rows(table: PositionsPage) -> list[dict[str, Any]]:
    """Per device: the average position and visibility of each column (None: not measured)."""
    by_key = {(s.request_id, s.device): s for s in table.summaries}
    devices = sorted({s.device for s in table.summaries})
    return [
        {
            "device": device,
            "cells": [by_key.get((c.request_id, device)) for c in table.columns],
        }
        for device in devices
    ]


@get(f"{PREFIX}/positions.csv")
async def positions_csv(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    device: FromQuery[str] = "",
    moved: FromQuery[str] = "",
    band: FromQuery[str] = "",
    q: FromQuery[str] = "",
    sort: FromQuery[str] = "keyword",
    order: FromQuery[str] = "asc",
    columns: FromQuery[str] = "",
    features: FromQuery[str] = "",
    url_issues: FromQuery[str] = "",
    tag: FromQuery[str] = "",
) -> Response[str]:
    """The table the page shows (its filters and sort), every row, as CSV."""
    params = TableParams(
        device=device,
        moved=moved,
        band=band,
        q=q,
        sort=sort,
        order=order,
        columns=columns,
        features=features,
        url_issues=url_issues,
        tag=tag,
    )
    session = uow.session
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    table = await export.all_positions(session, schedule, params.query())
    await export.record_export(
        session, schedule_id, principal.workspace_id, "positions", clock.now()
    )
    location = await locations.shown(session, schedule.location_code)
    return csv_response(export.positions_csv(table, location), f"positions-{schedule_id}.csv")


@get(f"{PREFIX}/log.csv")
async def log_csv(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, schedule_id: FromPath[int]
) -> Response[str]:
    session = uow.session
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    text = await export.log_csv(session, schedule_id)
    await export.record_export(session, schedule_id, principal.workspace_id, "log", clock.now())
    return csv_response(text, f"log-{schedule_id}.csv")


class CompetitorsForm(msgspec.Struct, kw_only=True):
    domains: str = ""


@post(f"{PREFIX}/competitors")
async def competitors_form(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    data: URLEncodedBody[CompetitorsForm],
) -> Redirect:
    """Up to 5 competitor domains, one a line or separated by commas."""
    raw = [d for d in re.split(r"[\s,;]+", data.domains) if d]
    try:
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            domains = await set_competitors(uow.session, schedule, raw, clock.now())
        text = (
            "Competitors from the next run: " + ", ".join(domains)
            if domains
            else "No competitors tracked"
        )
    except DomainError as exc:
        text = exc.message
    return Redirect(f"/ui/ranktracking/schedules/{schedule_id}?notice={quote(text)}")


class TargetsForm(msgspec.Struct, kw_only=True):
    targets: str = ""


def parse_targets(text: str) -> dict[str, str]:
    """``keyword, URL`` one a line (the last comma separates them; a keyword may hold commas)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        keyword, _, url = line.rpartition(",")
        if keyword.strip():
            out[keyword.strip()] = url.strip()
    return out


@post(f"{PREFIX}/targets")
async def targets_form(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    data: URLEncodedBody[TargetsForm],
) -> Redirect:
    try:
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            targets = await set_targets(
                uow.session, schedule, parse_targets(data.targets), clock.now()
            )
        text = f"Target URLs set for {counted(len(targets), 'keyword')}"
    except DomainError as exc:
        text = exc.message
    return Redirect(f"/ui/ranktracking/schedules/{schedule_id}?notice={quote(text)}")


ROUTES: list[Any] = [positions_csv, log_csv, competitors_form, targets_form]
