"""A keyword's movements (each measurement that changed something, explained against the one
before it on the same device) and the automatic chart notes they give."""

from __future__ import annotations

import json
from datetime import datetime
from itertools import pairwise

from sqlalchemy import Text, and_, cast, func, or_, select

from app.db.session import ReadSession
from app.engines.ranktracking.explain.diff import changed, compare
from app.engines.ranktracking.explain.labels import capital, label
from app.engines.ranktracking.explain.measured import (
    Measured,
    keyword_measurements,
)
from app.engines.ranktracking.explain.schemas import ChartNote, MovementOut, MovementsOut
from app.engines.ranktracking.models import RETRIEVED, Result, Schedule
from app.engines.ranktracking.reports.measurements import KEYWORD_DATA, Column, run_set
from app.engines.ranktracking.reports.targets import page_key
from app.engines.ranktracking.wording import counted

MOVEMENT_REQUESTS = 13
"""Measurements read for the keyword page's explanations: twelve changes at most."""


async def keyword_movements(
    session: ReadSession,
    schedule: Schedule,
    keyword: str,
    *,
    limit_requests: int = MOVEMENT_REQUESTS,
) -> MovementsOut:
    by_device = await keyword_measurements(
        session, schedule.id, keyword, limit_requests=limit_requests
    )
    items = [
        m
        for series in by_device.values()
        for m in explain_series(keyword, schedule.domain or "", series)
        if changed(m)
    ]
    items.sort(key=lambda m: (m.request_id, m.device), reverse=True)
    return MovementsOut(keyword=keyword, items=items)


def explain_series(keyword: str, domain: str, series: list[Measured]) -> list[MovementOut]:
    return [compare(keyword, domain, before, after) for before, after in pairwise(series)]


def auto_notes(by_device: dict[str, list[Measured]], *, devices: int) -> list[ChartNote]:
    """What changed on the page, one note per measurement: a feature that appeared or vanished,
    another ranking URL. The device is named when the schedule measures both."""
    notes: dict[tuple[datetime, str], set[str]] = {}
    for device, series in by_device.items():
        for before, after in pairwise(series):
            for text in _events(before, after):
                notes.setdefault((after.measured_at, text), set()).add(device)
    out = []
    for (at, text), found in sorted(notes.items()):
        suffix = f" ({' and '.join(sorted(found))})" if devices > 1 and len(found) < devices else ""
        out.append(
            ChartNote(
                x=int(at.timestamp()), day=at.date().isoformat(), label=text + suffix, kind="auto"
            )
        )
    return out


def _events(before: Measured, after: Measured) -> list[str]:
    old, new = set(before.features), set(after.features)
    out = [f"{capital(label(k))} appeared" for k in sorted(new - old) if k != "organic"]
    out += [f"{capital(label(k))} vanished" for k in sorted(old - new) if k != "organic"]
    if (
        before.url
        and after.url
        and before.url != after.url
        and page_key(before.url) != page_key(after.url)
    ):
        out.append("Ranking URL changed")
    return out


async def schedule_auto_notes(
    session: ReadSession, schedule_id: int, columns: list[Column]
) -> list[ChartNote]:
    """Across every keyword: per measurement, how many keywords saw each page change.

    Read lean, as every keyword of every run shown is read: the feature list as its stored text
    (decoded only where it differs from the keyword's previous measurement) and the URL."""
    where = {
        run_id: (c.measured_at, device)
        for c in columns
        for device, run_id in c.runs.items()
        if device != KEYWORD_DATA
    }
    if not where:
        return []
    features = cast(Result.features, Text)
    by_keyword = (Result.keyword, Result.device)
    pages = (
        select(
            Result.run_id.label("run_id"),
            Result.keyword.label("keyword"),
            features.label("features"),
            Result.url.label("url"),
            func.lag(features)
            .over(partition_by=by_keyword, order_by=Result.run_id)
            .label("old_features"),
            func.lag(Result.url)
            .over(partition_by=by_keyword, order_by=Result.run_id)
            .label("old_url"),
        )
        .where(
            Result.schedule_id == schedule_id,
            Result.run_id.in_(run_set(list(where))),
            Result.state == RETRIEVED,
        )
        .subquery()
    )
    # The database compares each measurement with the keyword's previous one on the device and
    # returns only those that changed.
    rows = await session.execute(
        select(
            pages.c.run_id,
            pages.c.keyword,
            pages.c.old_features,
            pages.c.features,
            pages.c.old_url,
            pages.c.url,
        ).where(
            pages.c.old_features.is_not(None),
            or_(
                pages.c.features != pages.c.old_features,
                and_(
                    pages.c.url.is_not(None),
                    pages.c.old_url.is_not(None),
                    pages.c.url != pages.c.old_url,
                ),
            ),
        )
    )
    counts: dict[tuple[datetime, str], set[str]] = {}
    for run_id, keyword, old_features, new_features, old_url, url in rows.all():
        at, _ = where[run_id]
        for text in _changes(old_features, new_features, old_url, url):
            counts.setdefault((at, text), set()).add(keyword)
    return [
        ChartNote(
            x=int(at.timestamp()),
            day=at.date().isoformat(),
            label=f"{text} for {counted(len(kws), 'keyword')}",
            kind="auto",
        )
        for (at, text), kws in sorted(counts.items())
    ]


def _changes(
    old_features: str | None, new_features: str | None, old_url: str | None, new_url: str | None
) -> list[str]:
    out: list[str] = []
    if old_features != new_features:
        old = set(json.loads(old_features or "null") or [])
        new = set(json.loads(new_features or "null") or [])
        out += [f"{capital(label(k))} appeared" for k in sorted(new - old) if k != "organic"]
        out += [f"{capital(label(k))} vanished" for k in sorted(old - new) if k != "organic"]
    if old_url and new_url and old_url != new_url and page_key(old_url) != page_key(new_url):
        out.append("Ranking URL changed")
    return out
