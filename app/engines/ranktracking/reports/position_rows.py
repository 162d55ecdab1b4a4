"""The positions table's rows, built for the keys asked for (a page, or every row for an export):
their cells read only from the runs the table shows, their competitors and features only from
each device's latest two measurements."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, or_, select

from app.db.session import ReadSession
from app.engines.ranktracking.models import RETRIEVED, Result, Schedule
from app.engines.ranktracking.reports.position_keys import Key
from app.engines.ranktracking.reports.schemas import CellOut, Change, CompetitorCell, PositionRow
from app.engines.ranktracking.reports.serp_reading import winnable
from app.engines.ranktracking.reports.targets import url_flags
from app.engines.ranktracking.reports.window import Window

KEYWORDS_PER_CLAUSE = 1000
"""Above this many keywords of one device, its runs are read whole and the rows picked after:
a page never asks for more, an export of every row reads what it shows anyway."""


@dataclass(slots=True)
class Found:
    """One stored result, as the table reads it."""

    state: str
    position: int | None
    url: str | None
    competitors: dict[str, int | None] | None = None
    features: list[str] | None = None
    owned_features: list[str] | None = None

    @property
    def ranked(self) -> int | None:
        return self.position if self.state == RETRIEVED else None

    def competitor(self, domain: str) -> tuple[int | None] | None:
        """``(position,)`` when this result read the domain; None when it did not."""
        if self.state != RETRIEVED or self.competitors is None or domain not in self.competitors:
            return None
        return (self.competitors[domain],)


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


def _of_keys(runs: dict[str, list[int]], keys: Iterable[Key]) -> Any:
    """Results of ``keys``' keywords in each device's ``runs``."""
    keywords: dict[str, list[str]] = {}
    for key in keys:
        keywords.setdefault(key.device, []).append(key.keyword)
    clauses = []
    for device, words in keywords.items():
        if not runs.get(device):
            continue
        in_runs = Result.run_id.in_(runs[device])
        clauses.append(
            and_(in_runs, Result.keyword.in_(words))
            if len(words) <= KEYWORDS_PER_CLAUSE
            else in_runs
        )
    return or_(*clauses) if clauses else None


async def position_rows(
    session: ReadSession,
    schedule: Schedule,
    window: Window,
    keys: list[Key],
    volumes: dict[str, int],
) -> list[PositionRow]:
    """The rows of ``keys``, in their order."""
    device_runs = window.device_runs()
    recent = {d: runs[-2:] for d, runs in device_runs.items()}
    wanted = {(k.keyword, k.device) for k in keys}
    cells: dict[tuple[str, str], dict[int, Found]] = {}
    where = _of_keys(device_runs, keys)
    if where is not None:
        rows = await session.execute(
            select(
                Result.keyword,
                Result.device,
                Result.run_id,
                Result.state,
                Result.position,
                Result.url,
            ).where(where)
        )
        for keyword, device, run_id, state, position, url in rows.all():
            if (keyword, device or "") in wanted:
                cells.setdefault((keyword, device or ""), {})[run_id] = Found(state, position, url)
        # The JSON values (competitors, features) are read only from each device's last two
        # runs: decoding them for every cell of the window was most of the table's time.
        extras = await session.execute(
            select(
                Result.keyword,
                Result.device,
                Result.run_id,
                Result.competitors,
                Result.features,
                Result.owned_features,
            ).where(_of_keys(recent, keys))
        )
        for keyword, device, run_id, comp, features, owned in extras.all():
            found = cells.get((keyword, device or ""), {}).get(run_id)
            if found is not None:
                found.competitors, found.features, found.owned_features = comp, features, owned
    competitors = list(schedule.competitors or [])
    targets = dict(schedule.target_urls or {})
    return [
        _row(
            key,
            cells.get((key.keyword, key.device), {}),
            window,
            device_runs,
            volumes,
            competitors,
            targets,
        )
        for key in keys
    ]


def _row(
    key: Key,
    by_run: dict[int, Found],
    window: Window,
    device_runs: dict[str, list[int]],
    volumes: dict[str, int],
    competitors: list[str],
    targets: dict[str, str],
) -> PositionRow:
    keyword, device = key.keyword, key.device
    runs = device_runs.get(device, [])
    latest = by_run.get(runs[-1]) if runs else None
    prior = by_run.get(runs[-2]) if len(runs) > 1 else None
    previous_position = prior.ranked if prior is not None else None
    change, delta = change_of(
        (latest.state, latest.position) if latest else None, previous_position
    )
    shown = [by_run.get(c.runs.get(device, -1)) for c in window.columns]
    features = list(latest.features or []) if latest else []
    owned = list(latest.owned_features or []) if latest else []
    ranks_top10 = latest is not None and latest.position is not None and latest.position <= 10
    return PositionRow(
        keyword=keyword,
        device=device,
        state=latest.state if latest else None,
        position=latest.position if latest else None,
        previous=previous_position,
        change=change,
        delta=delta,
        best=key.best,
        url=latest.url if latest else None,
        search_volume=volumes.get(keyword),
        cells=[
            CellOut(state=f.state, position=f.position) if f else CellOut(state=None, position=None)
            for f in shown
        ],
        competitors=[_competitor(d, latest, prior) for d in competitors],
        features=features,
        owned_features=owned,
        winnable_features=winnable(features, owned) if ranks_top10 else [],
        target_url=targets.get(keyword),
        url_flags=url_flags(
            targets.get(keyword),
            latest.url if latest and latest.ranked is not None else None,
            [f.url for f in shown if f is not None and f.ranked is not None and f.url],
        ),
    )


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
