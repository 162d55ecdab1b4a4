"""Chart series: one x per measured request (desktop and mobile of a request share it), one value
per device and measurement, ``None`` where the run measured nothing for it — a gap in the line.

Per keyword: the position over time. Per schedule: visibility and average position over time,
over every keyword, one tag's, or each tag side by side."""

from __future__ import annotations

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.ranktracking.explain import annotations as user_notes
from app.engines.ranktracking.explain.measured import measurements_in
from app.engines.ranktracking.explain.movements import auto_notes, schedule_auto_notes
from app.engines.ranktracking.explain.schemas import ChartNote
from app.engines.ranktracking.models import Result, Schedule
from app.engines.ranktracking.reports.measurements import KEYWORD_DATA, Column, measured_runs
from app.engines.ranktracking.reports.rivals import competitor_figures
from app.engines.ranktracking.reports.schemas import RunSummaryOut
from app.engines.ranktracking.reports.summary import run_summaries
from app.engines.ranktracking.tags import tagged_keywords
from app.schemas import Schema

CHART_POINTS = 104
AUTO_NOTE_REQUESTS = 13
"""Measurements whose page changes are noted on the schedule's charts (every keyword is read)."""


class SeriesOut(Schema):
    label: str
    values: list[float | None]


class ChartOut(Schema):
    title: str
    x: list[int]
    """Unix seconds of each measurement, oldest first."""
    series: list[SeriesOut]
    y_label: str
    inverted: bool
    """Position charts: 1 at the top."""
    notes: list[ChartNote] = []
    """Annotations on the time axis: people's, and what changed on the results pages."""


def _devices(columns: list[Column]) -> list[str]:
    found = {d for c in columns for d in c.runs if d != KEYWORD_DATA}
    return [d for d in ("desktop", "mobile") if d in found]


def _x(columns: list[Column]) -> list[int]:
    return [int(c.measured_at.timestamp()) for c in columns]


async def keyword_chart(
    session: ReadSession, schedule_id: int, keyword: str, competitors: list[str] | None = None
) -> ChartOut:
    competitors = competitors or []
    columns = await measured_runs(session, schedule_id, limit_requests=CHART_POINTS)
    run_ids = [r for c in columns for d, r in c.runs.items() if d != KEYWORD_DATA]
    found: dict[int, tuple[int | None, dict[str, int | None]]] = {}
    if run_ids:
        rows = await session.execute(
            select(Result.run_id, Result.position, Result.competitors).where(
                Result.schedule_id == schedule_id,
                Result.keyword == keyword,
                Result.run_id.in_(run_ids),
            )
        )
        found = {run_id: (position, comp or {}) for run_id, position, comp in rows.all()}
    devices = _devices(columns)
    series = [
        SeriesOut(
            label=device,
            values=[found.get(c.runs.get(device, -1), (None, {}))[0] for c in columns],
        )
        for device in devices
    ]
    # Competitors beside the tracked domain, read from the same pages.
    for domain in competitors:
        for device in devices:
            values: list[float | None] = [
                found.get(c.runs.get(device, -1), (None, {}))[1].get(domain) for c in columns
            ]
            if any(v is not None for v in values):
                series.append(SeriesOut(label=f"{domain} ({device})", values=values))
    by_device = await measurements_in(session, schedule_id, columns, [keyword], with_pages=False)
    notes = user_notes.as_notes(await user_notes.list_for(session, schedule_id, keyword))
    notes += auto_notes(by_device, devices=len(devices))
    return ChartOut(
        title=f"Position of “{keyword}”",
        x=_x(columns),
        series=series,
        y_label="position",
        inverted=True,
        notes=sorted(notes, key=lambda n: n.x),
    )


async def schedule_charts(
    session: ReadSession, schedule_id: int, *, tag: str | None = None
) -> list[ChartOut]:
    """Visibility and average position over time, one series per device, and beside them each
    competitor's (``domain (device)``), read from the same pages. With a ``tag`` (normalised),
    the figures of the keywords carrying it only (RT-71), without the competitors' (theirs are
    over every keyword)."""
    columns = await measured_runs(session, schedule_id, limit_requests=CHART_POINTS)
    keywords = tagged_keywords(schedule_id, tag) if tag is not None else None
    summaries = {
        (s.request_id, s.device): s
        for s in await run_summaries(session, columns, keywords=keywords)
    }
    devices = _devices(columns)
    domains = list(
        await session.scalar(select(Schedule.competitors).where(Schedule.id == schedule_id)) or []
    )
    if tag is not None:
        domains = []
    rivals = await competitor_figures(session, columns, domains)

    def series(figure: str) -> list[SeriesOut]:
        out = []
        for device in devices:
            values: list[float | None] = []
            for c in columns:
                s = summaries.get((c.request_id, device))
                values.append(getattr(s, figure) if s is not None else None)
            out.append(SeriesOut(label=device, values=values))
        for domain in domains:
            for device in devices:
                values = [
                    getattr(f, figure)
                    if (f := rivals.get((c.request_id, device, domain)))
                    else None
                    for c in columns
                ]
                if any(v is not None for v in values):
                    out.append(SeriesOut(label=f"{domain} ({device})", values=values))
        return out

    x = _x(columns)
    # The schedule's charts carry its schedule-wide notes; a keyword's note stays on its chart.
    every = await user_notes.list_for(session, schedule_id)
    notes = user_notes.as_notes([a for a in every if a.keyword is None])
    notes += await schedule_auto_notes(session, schedule_id, columns[-AUTO_NOTE_REQUESTS:])
    notes.sort(key=lambda n: n.x)
    suffix = f" of the keywords tagged “{tag}”" if tag is not None else ""
    return [
        ChartOut(
            title="Visibility" + suffix,
            x=x,
            series=series("visibility"),
            y_label="%",
            inverted=False,
            notes=notes,
        ),
        ChartOut(
            title="Average position" + suffix,
            x=x,
            series=series("average_position"),
            y_label="position",
            inverted=True,
            notes=notes,
        ),
    ]


TAG_CHART_TAGS = 8
"""Tags drawn side by side on the per-tag charts (more lines would be unreadable)."""


async def tag_charts(session: ReadSession, schedule_id: int, tags: list[str]) -> list[ChartOut]:
    """Visibility and average position over time with one line per tag (and device), each over
    the keywords carrying that tag (RT-71): the groups compared on one time axis. ``tags`` are
    normalised; the first :data:`TAG_CHART_TAGS` are drawn."""
    columns = await measured_runs(session, schedule_id, limit_requests=CHART_POINTS)
    devices = _devices(columns)
    chosen = tags[:TAG_CHART_TAGS]
    by_tag: dict[str, dict[tuple[int, str], RunSummaryOut]] = {}
    for tag in chosen:
        summaries = await run_summaries(
            session, columns, keywords=tagged_keywords(schedule_id, tag)
        )
        by_tag[tag] = {(s.request_id, s.device): s for s in summaries}

    def series(figure: str) -> list[SeriesOut]:
        out = []
        for tag in chosen:
            for device in devices:
                values: list[float | None] = [
                    getattr(s, figure) if (s := by_tag[tag].get((c.request_id, device))) else None
                    for c in columns
                ]
                # Not "tag (device)": the charts draw that label dashed, as a competitor.
                label = tag if len(devices) == 1 else f"{tag} · {device}"
                out.append(SeriesOut(label=label, values=values))
        return out

    x = _x(columns)
    return [
        ChartOut(
            title="Visibility by tag",
            x=x,
            series=series("visibility"),
            y_label="%",
            inverted=False,
        ),
        ChartOut(
            title="Average position by tag",
            x=x,
            series=series("average_position"),
            y_label="position",
            inverted=True,
        ),
    ]
