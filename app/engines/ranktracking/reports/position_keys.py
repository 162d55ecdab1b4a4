"""The positions table's rows as the database sees them, one per (keyword, device) measured by a
run the table shows: the sort and filter keys (the latest position, state and URL, the previous
measured position, the change between them, the best position ever measured) computed in SQL,
so the table is filtered, ordered and paged there and only the page's rows are built.

The same statement on SQLite and PostgreSQL. The order is the one the table has always had:
by the chosen key, rows without a value last whichever the direction, ties by keyword then
device, text by code point (Python's order of ``str``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.orm import aliased

from app.db.functions import code_point_order, position
from app.db.session import ReadSession
from app.engines.ranktracking.models import RETRIEVED, Result
from app.engines.ranktracking.reports.measurements import run_set
from app.engines.ranktracking.reports.window import Window
from app.engines.ranktracking.tags import tagged_keywords

SQL_SORTS = ("keyword", "device", "position", "change", "best", "url")
"""Sort keys the database orders by; ``volume`` comes from another schedule's keyword data and
is ordered in Python."""


@dataclass(frozen=True, slots=True)
class Filters:
    """The filters the database applies (the rest — features, URL flags — need the built rows)."""

    device: str | None = None
    moved: int | None = None
    in_top: int | None = None
    out_of_top: int | None = None
    search: str | None = None
    tag: str | None = None
    """Only keywords carrying this (normalised) tag (RT-71)."""


@dataclass(frozen=True, slots=True)
class Key:
    keyword: str
    device: str
    best: int | None
    """The best position over the schedule's whole history."""


# Ascending change order: gains (biggest first), new, same, unranked, losses (smallest first),
# lost; a row whose latest run did not retrieve the keyword has no change.
UP, NEW, SAME, UNRANKED, DOWN, LOST = range(6)


class _Statement:
    """The keys query's parts: one grouped pass over the schedule's results (best position, and
    whether a shown run measured the row) joined to the latest and the previous measurement."""

    def __init__(self, schedule_id: int, window: Window) -> None:
        self.schedule_id = schedule_id
        shown = case((Result.run_id.in_(run_set(window.shown_runs())), 1), else_=0)
        # Only a retrieved result ever holds a position, so the best needs no state filter: the
        # pass can be answered from the index ix_rt_results_keys alone.
        self.history = (
            select(
                Result.keyword.label("keyword"),
                Result.device.label("device"),
                func.min(Result.position).label("best"),
            )
            .where(Result.schedule_id == schedule_id)
            .group_by(Result.keyword, Result.device)
            .having(func.max(shown) == 1)
            .subquery("history")
        )
        h = self.history.c
        self.latest = aliased(Result, name="latest")
        self.prior = aliased(Result, name="prior")
        latest, prior = self.latest, self.prior
        # A result's device is its run's: the device's latest run is the only one that matches.
        self.joined = (
            select()
            .select_from(self.history)
            .outerjoin(
                latest,
                and_(
                    latest.run_id.in_(window.latest_runs()),
                    latest.keyword == h.keyword,
                    latest.device == h.device,
                ),
            )
            .outerjoin(
                prior,
                and_(
                    prior.run_id.in_(window.prior_runs()),
                    prior.keyword == h.keyword,
                    prior.device == h.device,
                    prior.state == RETRIEVED,
                ),
            )
        )
        retrieved = latest.state == RETRIEVED
        self.delta = case(
            (
                and_(retrieved, latest.position.is_not(None), prior.position.is_not(None)),
                prior.position - latest.position,
            ),
        )
        self.change = case(
            (and_(retrieved, latest.position.is_(None), prior.position.is_not(None)), LOST),
            (and_(retrieved, latest.position.is_(None)), UNRANKED),
            (and_(retrieved, prior.position.is_(None)), NEW),
            (and_(retrieved, prior.position > latest.position), UP),
            (and_(retrieved, prior.position < latest.position), DOWN),
            (retrieved, SAME),
        )

    def where(self, f: Filters) -> list[Any]:
        h, latest = self.history.c, self.latest
        out: list[Any] = []
        if f.device is not None:
            out.append(h.device == f.device)
        if f.moved is not None:
            out.append(or_(self.change.in_([NEW, LOST]), func.abs(self.delta) >= f.moved))
        if f.in_top is not None:
            out.append(and_(latest.position.is_not(None), latest.position <= f.in_top))
        if f.out_of_top is not None:
            out.append(
                and_(
                    latest.state == RETRIEVED,
                    or_(latest.position.is_(None), latest.position > f.out_of_top),
                )
            )
        if f.search:
            out.append(position(h.keyword, f.search.casefold()) > 0)
        if f.tag is not None:
            out.append(h.keyword.in_(tagged_keywords(self.schedule_id, f.tag)))
        return out

    def order_by(self, sort: str, order: str) -> list[Any]:
        h, latest = self.history.c, self.latest
        values: dict[str, list[Any]] = {
            "keyword": [code_point_order(h.keyword)],
            "device": [code_point_order(h.device)],
            "position": [latest.position],
            "best": [h.best],
            "url": [code_point_order(latest.url)],
            "change": [self.change, -func.coalesce(self.delta, 0)],
        }
        direction = [(v.desc() if order == "desc" else v.asc()).nulls_last() for v in values[sort]]
        return [*direction, *self.by_keyword()]

    def by_keyword(self) -> list[Any]:
        h = self.history.c
        return [code_point_order(h.keyword), code_point_order(h.device)]


def _key(row: Any) -> Key:
    return Key(row.keyword, row.device or "", row.best)


async def matching_keys(
    session: ReadSession,
    schedule_id: int,
    window: Window,
    filters: Filters,
    *,
    sort: str,
    order: str = "asc",
    page: tuple[int, int] | None = None,
) -> tuple[list[Key], int]:
    """The rows matching ``filters`` in the table's order (``sort`` one of :data:`SQL_SORTS`),
    only the ``page`` (offset, limit) of them when given, and how many match in all."""
    if not window.columns:
        return [], 0
    s = _Statement(schedule_id, window)
    h = s.history.c
    where = s.where(filters)
    query = (
        s.joined.add_columns(h.keyword, h.device, h.best)
        .where(*where)
        .order_by(*s.order_by(sort, order))
    )
    if page is None:
        keys = [_key(r) for r in (await session.execute(query)).all()]
        return keys, len(keys)
    offset, limit = page
    rows = (
        await session.execute(
            query.add_columns(func.count().over().label("total")).offset(offset).limit(limit)
        )
    ).all()
    if rows:
        return [_key(r) for r in rows], int(rows[0].total)
    if offset == 0:
        return [], 0
    # Past the last page: the window function had no row to count on, so count on its own.
    total = await session.scalar(s.joined.add_columns(func.count()).where(*where))
    return [], int(total or 0)
