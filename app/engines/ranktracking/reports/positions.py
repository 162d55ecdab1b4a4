"""The positions table of a schedule: keywords × its recent measurements, per device, with the
latest position, the change since the previous measurement, the best position ever measured, the
URL that ranked and the search volume where keyword data exists; filtered, sorted and paged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from sqlalchemy import func, select

from app.db.session import ReadSession
from app.engines.ranktracking.models import RETRIEVED, Result, Schedule
from app.engines.ranktracking.reports.measurements import Column, measured_runs
from app.engines.ranktracking.reports.schemas import (
    CellOut,
    Change,
    ColumnOut,
    CompetitorCell,
    PositionRow,
    PositionsPage,
)
from app.engines.ranktracking.reports.serp_reading import winnable
from app.engines.ranktracking.reports.summary import run_summaries
from app.engines.ranktracking.reports.targets import url_flags
from app.engines.ranktracking.reports.volume import search_volumes
from app.errors import ValidationFailed
from app.pagination import checked_limit, cursor_number


@dataclass(frozen=True, slots=True)
class Found:
    """One stored result, as the table reads it."""

    state: str
    position: int | None
    url: str | None
    competitors: dict[str, int | None] | None
    features: list[str] | None
    owned_features: list[str] | None

    @property
    def ranked(self) -> int | None:
        return self.position if self.state == RETRIEVED else None

    def competitor(self, domain: str) -> tuple[int | None] | None:
        """``(position,)`` when this result read the domain; None when it did not."""
        if self.state != RETRIEVED or self.competitors is None or domain not in self.competitors:
            return None
        return (self.competitors[domain],)


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
    features: str | None = None
    """``owned``: rows whose latest page has a feature of the domain; ``winnable``: a feature the
    domain could win (on the page, not the domain's, while it ranks in the top 10)."""
    url_issues: bool = False
    """Only rows flagged ``other_url`` or ``alternating``."""

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
        if self.features is not None and self.features not in ("owned", "winnable"):
            raise ValidationFailed.field("features", "owned or winnable")
        if self.sort not in SORT_KEYS:
            raise ValidationFailed.field("sort", "one of " + ", ".join(SORT_KEYS))
        if self.order not in ("asc", "desc"):
            raise ValidationFailed.field("order", "asc or desc")
        if not 1 <= self.columns <= MAX_COLUMNS:
            raise ValidationFailed.field("columns", f"from 1 to {MAX_COLUMNS} runs")
        checked_limit(self.limit, MAX_LIMIT)
        return cursor_number(self.cursor) or 0


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
    if q.url_issues and not row.url_flags:
        return False
    if q.features == "owned" and not row.owned_features:
        return False
    if q.features == "winnable" and not row.winnable_features:
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
    # The JSON values (competitors, features) are read only from each device's last two runs:
    # decoding them for every cell of the window was most of the table's time.
    recent: set[int] = set()
    for measured in {d for c in every for d in c.runs}:
        recent.update([c.runs[measured] for c in every if measured in c.runs][-2:])
    cells: dict[tuple[str, str], dict[int, Found]] = {}
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
            cells.setdefault((keyword, device or ""), {})[run_id] = Found(
                state, position, url, None, None, None
            )
        extras = await session.execute(
            select(
                Result.keyword,
                Result.device,
                Result.run_id,
                Result.competitors,
                Result.features,
                Result.owned_features,
            ).where(Result.run_id.in_(sorted(recent)))
        )
        for keyword, device, run_id, comp, features, owned in extras.all():
            by_run = cells[(keyword, device or "")]
            by_run[run_id] = replace(
                by_run[run_id], competitors=comp, features=features, owned_features=owned
            )
    best = dict(
        (
            ((kw, dev or ""), pos)
            for kw, dev, pos in (
                await session.execute(
                    # Only a retrieved result ever holds a position, so no state filter: the
                    # query is answered from the index ix_rt_results_best alone.
                    select(Result.keyword, Result.device, func.min(Result.position))
                    .where(Result.schedule_id == schedule.id)
                    .group_by(Result.keyword, Result.device)
                )
            ).all()
        )
    )
    volumes = await search_volumes(session, schedule)
    out: list[PositionRow] = []
    competitors = list(schedule.competitors or [])
    targets = dict(schedule.target_urls or {})
    for (keyword, device), by_run in cells.items():
        runs = [c.runs[device] for c in every if device in c.runs]
        latest = by_run.get(runs[-1]) if runs else None
        prior = by_run.get(runs[-2]) if len(runs) > 1 else None
        previous_position = prior.ranked if prior is not None else None
        change, delta = change_of(
            (latest.state, latest.position) if latest else None, previous_position
        )
        row_cells = []
        for c in columns:
            cell = by_run.get(c.runs.get(device, -1))
            row_cells.append(
                CellOut(state=cell.state, position=cell.position)
                if cell
                else CellOut(state=None, position=None)
            )
        if not any(c.state for c in row_cells):
            continue  # measured only before the window
        features = list(latest.features or []) if latest else []
        owned = list(latest.owned_features or []) if latest else []
        ranks_top10 = latest is not None and latest.position is not None and latest.position <= 10
        out.append(
            PositionRow(
                keyword=keyword,
                device=device,
                state=latest.state if latest else None,
                position=latest.position if latest else None,
                previous=previous_position,
                change=change,
                delta=delta,
                best=best.get((keyword, device)),
                url=latest.url if latest else None,
                search_volume=volumes.get(keyword),
                cells=row_cells,
                competitors=[_competitor(d, latest, prior) for d in competitors],
                features=features,
                owned_features=owned,
                winnable_features=winnable(features, owned) if ranks_top10 else [],
                target_url=targets.get(keyword),
                url_flags=url_flags(
                    targets.get(keyword),
                    latest.url if latest and latest.ranked is not None else None,
                    [
                        f.url
                        for c in columns
                        if (f := by_run.get(c.runs.get(device, -1))) is not None
                        and f.ranked is not None
                        and f.url
                    ],
                ),
            )
        )
    return out


def _competitor(domain: str, latest: Found | None, prior: Found | None) -> CompetitorCell:
    """A competitor's position on the same pages; the change is only known where the run that
    measured it also read this competitor (a domain added later has no earlier positions)."""
    now = latest.competitor(domain) if latest else None
    then = prior.competitor(domain) if prior else None
    if now is None:
        return CompetitorCell(domain=domain, position=None, previous=None, change=None)
    change, _ = change_of(("retrieved", now[0]), then[0] if then else None)
    return CompetitorCell(
        domain=domain, position=now[0], previous=then[0] if then else None, change=change
    )


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
        competitors=list(schedule.competitors or []),
        columns=[
            ColumnOut(request_id=c.request_id, measured_at=c.measured_at, runs=dict(c.runs))
            for c in columns
        ],
        summaries=await run_summaries(session, columns),
        items=page,
        total=len(rows),
        next_cursor=str(offset + q.limit) if more else None,
    )
