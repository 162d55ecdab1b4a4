"""The positions table of a schedule: keywords × its recent measurements, per device, with the
latest position, the change since the previous measurement, the best position ever measured, the
URL that ranked and the search volume where keyword data exists; filtered, sorted and paged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.db.session import ReadSession
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.reports.measurements import Column
from app.engines.ranktracking.reports.position_keys import (
    SQL_SORTS,
    Filters,
    Key,
    matching_keys,
)
from app.engines.ranktracking.reports.position_rows import position_rows
from app.engines.ranktracking.reports.schemas import ColumnOut, PositionRow, PositionsPage
from app.engines.ranktracking.reports.summary import run_summaries
from app.engines.ranktracking.reports.volume import search_volumes
from app.engines.ranktracking.reports.window import Window, table_window
from app.engines.ranktracking.tags import checked_tag, tagged_keywords
from app.errors import ValidationFailed
from app.pagination import checked_limit, cursor_number

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
    tag: str | None = None
    """Only keywords carrying this tag (RT-71); the figures above the table follow it."""

    def check(self) -> int:
        """The validated offset of the page."""
        if self.tag is not None:
            checked_tag(self.tag)
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


def _shows(row: PositionRow, q: TableQuery) -> bool:
    """The filters only a built row can answer (the others are the database's)."""
    if q.url_issues and not row.url_flags:
        return False
    if q.features == "owned" and not row.owned_features:
        return False
    return not (q.features == "winnable" and not row.winnable_features)


def _by_volume(keys: list[Key], volumes: dict[str, int], order: str) -> list[Key]:
    """``keys`` (by keyword and device) ordered by search volume; keywords without one last."""
    present = [k for k in keys if k.keyword in volumes]
    absent = [k for k in keys if k.keyword not in volumes]
    present.sort(key=lambda k: volumes[k.keyword], reverse=order == "desc")
    return present + absent


async def build_rows(
    session: ReadSession, schedule: Schedule, columns: list[Column], previous: Column | None
) -> list[PositionRow]:
    """Every (keyword, device) row of the measured ``columns``, by keyword then device;
    ``previous`` is the measurement before the first column, read only for the change of a
    device measured once in the window."""
    window = Window(columns, previous)
    keys, _ = await matching_keys(session, schedule.id, window, Filters(), sort="keyword")
    return await position_rows(
        session, schedule, window, keys, await search_volumes(session, schedule)
    )


async def positions_page(session: ReadSession, schedule: Schedule, q: TableQuery) -> PositionsPage:
    offset = q.check()
    window = await table_window(session, schedule, q.columns)
    volumes = await search_volumes(session, schedule)
    tag = checked_tag(q.tag) if q.tag is not None else None
    filters = Filters(
        device=q.device,
        moved=q.moved,
        in_top=q.in_top,
        out_of_top=q.out_of_top,
        search=q.search,
        tag=tag,
    )
    built_filters = q.features is not None or q.url_issues
    if q.sort in SQL_SORTS and not built_filters:
        # The common case: filtered, ordered and paged by the database; only the page is built.
        keys, total = await matching_keys(
            session,
            schedule.id,
            window,
            filters,
            sort=q.sort,
            order=q.order,
            page=(offset, q.limit),
        )
        items = await position_rows(session, schedule, window, keys, volumes)
    else:
        keys, total = await matching_keys(
            session,
            schedule.id,
            window,
            filters,
            # By volume: the keys by keyword and device first, then ordered in Python.
            sort=q.sort if q.sort in SQL_SORTS else "keyword",
            order=q.order if q.sort in SQL_SORTS else "asc",
        )
        if q.sort == "volume":
            keys = _by_volume(keys, volumes, q.order)
        if built_filters:
            # Features and URL flags are read from the rows themselves: every matching row is
            # built, then filtered.
            rows = await position_rows(session, schedule, window, keys, volumes)
            matching = [r for r in rows if _shows(r, q)]
            items, total = matching[offset : offset + q.limit], len(matching)
        else:
            items = await position_rows(
                session, schedule, window, keys[offset : offset + q.limit], volumes
            )
    return PositionsPage(
        schedule_id=schedule.id,
        depth=schedule.depth or 100,
        competitors=list(schedule.competitors or []),
        columns=[
            ColumnOut(request_id=c.request_id, measured_at=c.measured_at, runs=dict(c.runs))
            for c in window.columns
        ],
        summaries=await run_summaries(
            session,
            window.columns,
            keywords=tagged_keywords(schedule.id, tag) if tag is not None else None,
        ),
        items=items,
        total=total,
        next_cursor=str(offset + q.limit) if offset + q.limit < total else None,
    )
