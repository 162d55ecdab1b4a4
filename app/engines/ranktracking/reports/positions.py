"""The positions table of a schedule: keywords × its recent measurements, per device, with the
latest position, the change since the previous measurement, the best position ever measured, the
URL that ranked and the search volume where keyword data exists; filtered, sorted and paged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import func, select

from app.db.session import ReadSession
from app.engines.ranktracking.models import RETRIEVED, Result, Schedule
from app.engines.ranktracking.reports.measurements import Column, measured_runs
from app.engines.ranktracking.reports.schemas import (
    CellOut,
    Change,
    ColumnOut,
    PositionRow,
    PositionsPage,
)
from app.engines.ranktracking.reports.summary import run_summaries
from app.engines.ranktracking.reports.volume import search_volumes
from app.errors import ValidationFailed

SortKey = Literal["keyword", "device", "position", "change", "best", "volume", "url"]
SORT_KEYS = ("keyword", "device", "position", "change", "best", "volume", "url")
TOP_BANDS = (3, 10, 100)
DEFAULT_COLUMNS, MAX_COLUMNS = 8, 52
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


@dataclass(frozen=True, slots=True)
class TableQuery:
    """What the person asked for; ``check()`` turns bad values into a 422 naming the field."""

    device: str | None = None
    moved: int | None = None
    """Only rows that moved by at least this many places (``new`` and ``lost`` count as moved)."""
    in_top: int | None = None
    out_of_top: int | None = None
    sort: str = "keyword"
    order: str = "asc"
    columns: int = DEFAULT_COLUMNS
    cursor: str | None = None
    limit: int = DEFAULT_LIMIT
    search: str | None = None
    """Keywords containing this text."""

    def check(self) -> int:
        """The validated offset of the page."""
        if self.device is not None and self.device not in ("desktop", "mobile"):
            raise ValidationFailed.field("device", "desktop or mobile")
        if self.moved is not None and not 1 <= self.moved <= 100:
            raise ValidationFailed.field("moved", "a number of places from 1 to 100")
        for name in ("in_top", "out_of_top"):
            value = getattr(self, name)
            if value is not None and value not in TOP_BANDS:
                raise ValidationFailed.field(name, "3, 10 or 100")
        if self.sort not in SORT_KEYS:
            raise ValidationFailed.field("sort", "one of " + ", ".join(SORT_KEYS))
        if self.order not in ("asc", "desc"):
            raise ValidationFailed.field("order", "asc or desc")
        if not 1 <= self.columns <= MAX_COLUMNS:
            raise ValidationFailed.field("columns", f"from 1 to {MAX_COLUMNS} runs")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ValidationFailed.field("limit", f"from 1 to {MAX_LIMIT} rows")
        if self.cursor in (None, ""):
            return 0
        assert self.cursor is not None
        if not self.cursor.isdigit():
            raise ValidationFailed.field("cursor", "not a cursor from a previous page")
        return int(self.cursor)


def change_of(
    latest: tuple[str, int | None] | None, previous: int | None
) -> tuple[Change | None, int | None]:
    """The change and the places gained, from the latest (state, position) and the previous
    measured position (None: not ranked then, or not measured)."""
    if latest is None or latest[0] != RETRIEVED:
        return None, None
    position = latest[1]
    if position is None:
        return ("lost", None) if previous is not None else ("unranked", None)
    if previous is None:
        return "new", None
    delta = previous - position
    return ("up" if delta > 0 else "down" if delta < 0 else "same"), delta


def _moved(row: PositionRow, places: int) -> bool:
    if row.change in ("new", "lost"):
        return True
    return row.delta is not None and abs(row.delta) >= places


def _matches(row: PositionRow, q: TableQuery) -> bool:
    if q.device is not None and row.device != q.device:
        return False
    if q.moved is not None and not _moved(row, q.moved):
        return False
    if q.in_top is not None and (row.position is None or row.position > q.in_top):
        return False
    if q.out_of_top is not None and (
        row.state != RETRIEVED or (row.position is not None and row.position <= q.out_of_top)
    ):
        return False
    return not (q.search and q.search.casefold() not in row.keyword)


_CHANGE_ORDER = {"up": 0, "new": 1, "same": 2, "unranked": 3, "down": 4, "lost": 5}

_SORT_VALUE: dict[str, Callable[[PositionRow], Any]] = {
    "keyword": lambda r: r.keyword,
    "device": lambda r: r.device,
    "position": lambda r: r.position,
    "best": lambda r: r.best,
    "volume": lambda r: r.search_volume,
    "url": lambda r: r.url,
    # Ascending: gains (biggest first), new, same, unranked, losses (smallest first), lost.
    "change": lambda r: (_CHANGE_ORDER[r.change], -(r.delta or 0)) if r.change else None,
}


def sort_rows(rows: list[PositionRow], key: str, order: str) -> list[PositionRow]:
    """Sorted by ``key`` then keyword and device; rows without a value always come last."""
    value = _SORT_VALUE[key]
    rows = sorted(rows, key=lambda r: (r.keyword, r.device))
    present = [r for r in rows if value(r) is not None]
    absent = [r for r in rows if value(r) is None]
    present.sort(key=value, reverse=order == "desc")
    return present + absent


async def build_rows(
    session: ReadSession, schedule: Schedule, columns: list[Column], previous: Column | None
) -> list[PositionRow]:
    """Every (keyword, device) row of the measured ``columns``; ``previous`` is the measurement
    before the first column, read only for the change of a device measured once in the window."""
    every = ([previous] if previous is not None else []) + columns
    run_ids = [run_id for c in every for run_id in c.runs.values()]
    cells: dict[tuple[str, str], dict[int, tuple[str, int | None, str | None]]] = {}
    if run_ids:
        rows = await session.execute(
            select(
                Result.keyword,
                Result.device,
                Result.run_id,
                Result.state,
                Result.position,
                Result.url,
            ).where(Result.run_id.in_(run_ids))
        )
        for keyword, device, run_id, state, position, url in rows.all():
            cells.setdefault((keyword, device or ""), {})[run_id] = (state, position, url)
    best = dict(
        (
            ((kw, dev or ""), pos)
            for kw, dev, pos in (
                await session.execute(
                    select(Result.keyword, Result.device, func.min(Result.position))
                    .where(Result.schedule_id == schedule.id, Result.state == RETRIEVED)
                    .group_by(Result.keyword, Result.device)
                )
            ).all()
        )
    )
    volumes = await search_volumes(session, schedule)
    out: list[PositionRow] = []
    for (keyword, device), by_run in cells.items():
        runs = [c.runs[device] for c in every if device in c.runs]
        latest = by_run.get(runs[-1]) if runs else None
        prior = by_run.get(runs[-2]) if len(runs) > 1 else None
        previous_position = prior[1] if prior is not None and prior[0] == RETRIEVED else None
        change, delta = change_of((latest[0], latest[1]) if latest else None, previous_position)
        row_cells = []
        for c in columns:
            cell = by_run.get(c.runs.get(device, -1))
            row_cells.append(
                CellOut(state=cell[0], position=cell[1])
                if cell
                else CellOut(state=None, position=None)
            )
        if not any(c.state for c in row_cells):
            continue  # measured only before the window
        out.append(
            PositionRow(
                keyword=keyword,
                device=device,
                state=latest[0] if latest else None,
                position=latest[1] if latest else None,
                previous=previous_position,
                change=change,
                delta=delta,
                best=best.get((keyword, device)),
                url=latest[2] if latest else None,
                search_volume=volumes.get(keyword),
                cells=row_cells,
            )
        )
    return out


async def positions_page(session: ReadSession, schedule: Schedule, q: TableQuery) -> PositionsPage:
    offset = q.check()
    measured = await measured_runs(session, schedule.id, limit_requests=q.columns + 1)
    previous = measured[0] if len(measured) > q.columns else None
    columns = measured[1:] if previous is not None else measured
    if schedule.data_type != "serp":
        columns, previous = [], None
    rows = [r for r in await build_rows(session, schedule, columns, previous) if _matches(r, q)]
    rows = sort_rows(rows, q.sort, q.order)
    page = rows[offset : offset + q.limit]
    more = offset + q.limit < len(rows)
    return PositionsPage(
        schedule_id=schedule.id,
        depth=schedule.depth or 100,
        columns=[
            ColumnOut(request_id=c.request_id, measured_at=c.measured_at, runs=dict(c.runs))
            for c in columns
        ],
        summaries=await run_summaries(session, columns),
        items=page,
        total=len(rows),
        next_cursor=str(offset + q.limit) if more else None,
    )
