"""CSV exports of the positions table and of the run log.

A spreadsheet runs a cell that begins with ``=``, ``+``, ``-`` or ``@`` (and, in some, a tab or a
carriage return) as a formula, so every text cell that begins with one of them is written with a
leading apostrophe: it reads as the text it was. Keywords, URLs and error messages come from
people and from the provider's pages, so any of them may begin so. Numbers are written as numbers
(a negative change stays a number): a number cannot carry a formula."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

import msgspec

from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking import locations
from app.engines.ranktracking.amounts import exact_eur
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.records.log import groups
from app.engines.ranktracking.reports.positions import MAX_LIMIT, TableQuery, positions_page
from app.engines.ranktracking.reports.schemas import PositionRow, PositionsPage
from app.platform import audit

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
Cell = str | int | float | None


def neutralise(value: Cell) -> str | int | float:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([neutralise(h) for h in header])
    for row in rows:
        writer.writerow([neutralise(v) for v in row])
    return out.getvalue()


async def all_positions(session: ReadSession, schedule: Schedule, q: TableQuery) -> PositionsPage:
    """Every row matching ``q`` (its page and size ignored), in one page."""
    first = await positions_page(session, schedule, replace(q, cursor=None, limit=MAX_LIMIT))
    page, items = first, list(first.items)
    while page.next_cursor is not None:
        page = await positions_page(
            session, schedule, replace(q, cursor=page.next_cursor, limit=MAX_LIMIT)
        )
        items += page.items
    return replace_items(first, items)


def replace_items(page: PositionsPage, items: list[PositionRow]) -> PositionsPage:
    return msgspec.structs.replace(page, items=items, next_cursor=None)


def positions_csv(page: PositionsPage, location: locations.Location | None = None) -> str:
    """The table as shown: one row per keyword and device with the schedule's location (code and
    the provider's name, RT-63), one column per measured run (its date), then the latest position,
    change, places gained, best, URL, search volume, each competitor's position and the page's
    features (and those the domain owns)."""
    dates = [c.measured_at.strftime("%Y-%m-%d %H:%M") for c in page.columns]
    code = location.code if location else None
    name = location.name if location else None
    header = [
        "keyword",
        "device",
        "location_code",
        "location_name",
        *dates,
        "position",
        "change",
        "delta",
        "best",
        "url",
        "volume",
        *page.competitors,
        "features",
        "owned_features",
    ]
    return csv_text(
        header,
        (
            [
                r.keyword,
                r.device,
                code,
                name,
                *(c.position if c.state == "retrieved" else c.state for c in r.cells),
                r.position,
                r.change,
                r.delta,
                r.best,
                r.url,
                r.search_volume,
                *(c.position for c in r.competitors),
                " ".join(r.features),
                " ".join(r.owned_features),
            ]
            for r in page.items
        ),
    )


LOG_HEADER = [
    "request",
    "trigger",
    "queue",
    "created_at",
    "run",
    "device",
    "location_code",
    "location_name",
    "status",
    "requested",
    "retrieved",
    "no_data",
    "missing",
    "error_code",
    "error_message",
    "settled_eur",
]
LOG_BATCH = 500


async def log_csv(session: ReadSession, schedule_id: int) -> str:
    """Every child run of the schedule's log, newest request first (skipped requests included:
    they are rows of the log too)."""
    rows: list[list[Cell]] = []
    before: int | None = None
    while True:
        batch = await groups(session, schedule_id, limit=LOG_BATCH, before_id=before)
        names = await locations.named(
            session, (r.location_code for g in batch for r in g.runs or [])
        )
        for g in batch:
            for r in g.runs or []:
                rows.append(
                    [
                        g.request_id,
                        g.trigger,
                        g.queue,
                        g.created_at.isoformat(),
                        r.id,
                        r.device or "keyword_data",
                        r.location_code,
                        names[r.location_code].name if r.location_code in names else None,
                        r.shown_status,
                        r.requested,
                        r.retrieved,
                        r.no_data,
                        r.missing,
                        r.error_code,
                        r.error_message,
                        # The exact charge (settlements keep sub-cent precision).
                        exact_eur(r.settled_micros) if r.settled_micros is not None else None,
                    ]
                )
        if len(batch) < LOG_BATCH:
            return csv_text(LOG_HEADER, rows)
        before = batch[-1].request_id


async def record_export(
    session: WriteSession, schedule_id: int, workspace_id: int, what: str, now: datetime
) -> None:
    """Leave the download in the organisation's audit log (``positions`` or ``log``)."""
    await audit.record(
        session,
        action=f"rank_schedule.{what}_exported",
        object_type="rank_schedule",
        object_id=schedule_id,
        workspace_id=workspace_id,
        now=now,
    )
