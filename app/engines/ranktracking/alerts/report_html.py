"""The HTML alternative of the e-mail report: the same figures as the text, with the period's
average position and visibility drawn as PNG charts sent inline (``cid:`` images), so mail
clients show them without loading anything from the network.

Everything interpolated is escaped: keywords, names and domains are customer input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from app.engines.ranktracking.alerts.periods import label
from app.engines.ranktracking.alerts.report_content import ReportContent, figure
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.reports.png_chart import Colour, Series, line_chart
from app.engines.ranktracking.reports.schemas import PositionRow, RunSummaryOut
from app.integrations.mail import InlineImage
from app.platform.models import WorkspaceLogo

DEVICE_COLOURS: dict[str, Colour] = {"desktop": (37, 99, 235), "mobile": (234, 88, 12)}
OTHER_COLOUR: Colour = (90, 90, 90)
LOGO = "rt-logo@sweepline"


def _scroller(name: str) -> str:
    """Opens the box around a table: a narrow screen scrolls the table, not the page, and the
    box takes the keyboard's focus so it can be scrolled without a mouse."""
    return (
        f'<div tabindex="0" role="region" aria-label="{escape(name)}" '
        'style="overflow-x:auto;max-width:100%">'
    )


POSITION_CHART = "rt-chart-position@sweepline"
VISIBILITY_CHART = "rt-chart-visibility@sweepline"


@dataclass(frozen=True, slots=True)
class HtmlReport:
    page: str
    images: list[InlineImage]


def logo_image(logo: WorkspaceLogo | None) -> InlineImage | None:
    """The workspace's logo as an inline image of the report (None without one)."""
    if logo is None:
        return None
    return InlineImage(
        content_id=LOGO, subtype=logo.content_type.removeprefix("image/"), data=logo.data
    )


def _hex(colour: Colour) -> str:
    return "#{:02x}{:02x}{:02x}".format(*colour)


def _by_device(
    trend: Sequence[RunSummaryOut], pick: str
) -> tuple[list[datetime], dict[str, list[float | None]]]:
    """The measurements in order and, per device, its figure at each (``None`` when absent)."""
    requests: list[int] = []
    dates: list[datetime] = []
    for s in trend:
        if s.request_id not in requests:
            requests.append(s.request_id)
            dates.append(s.measured_at)
    lines: dict[str, list[float | None]] = {}
    for s in trend:
        values = lines.setdefault(s.device, [None] * len(requests))
        values[requests.index(s.request_id)] = getattr(s, pick)
    return dates, lines


def _chart(
    trend: Sequence[RunSummaryOut], pick: str, cid: str, title: str, *, inverted: bool, unit: str
) -> tuple[str, InlineImage] | None:
    dates, lines = _by_device(trend, pick)
    values = [v for line in lines.values() for v in line if v is not None]
    if not values:
        return None
    low, high = (min(values), max(values)) if inverted else (0.0, max(max(values), 1.0))
    if inverted:
        low, high = max(1.0, low - 1), high + 1
    png = line_chart(
        [
            Series(DEVICE_COLOURS.get(device, OTHER_COLOUR), line)
            for device, line in sorted(lines.items())
        ],
        low=low,
        high=high,
        inverted=inverted,
    )
    legend = " ".join(
        f'<span style="color:{_hex(DEVICE_COLOURS.get(d, OTHER_COLOUR))}">&#9632;</span> {escape(d)}'
        for d in sorted(lines)
    )
    scale = (
        f"best at top: {low:.0f} to {high:.0f}"
        if inverted
        else f"0 to {high:.0f}{unit} from bottom"
    )
    alt = f"{title} from {dates[0]:%Y-%m-%d} to {dates[-1]:%Y-%m-%d}"
    block = (
        f'<h2 style="margin:16px 0 4px;font-size:1.17em">{escape(title)}</h2>'
        f'<img src="cid:{cid}" alt="{escape(alt)}" width="560" height="220" '
        'style="max-width:100%;height:auto;border:1px solid #e2e6ec">'
        f'<p style="margin:4px 0;color:#555;font-size:13px">{legend} · {escape(scale)} · '
        f"{dates[0]:%Y-%m-%d} → {dates[-1]:%Y-%m-%d}</p>"
    )
    return block, InlineImage(content_id=cid, subtype="png", data=png)


def _movers(title: str, rows: Sequence[PositionRow]) -> str:
    if not rows:
        return ""
    items = "".join(
        f"<tr><td>{escape(r.keyword)}</td><td>{escape(r.device)}</td>"
        f"<td>{r.previous if r.previous is not None else '–'} → "
        f"{r.position if r.position is not None else '–'}</td></tr>"
        for r in rows
    )
    return (
        f'<h2 style="margin:16px 0 4px;font-size:1.17em">{escape(title)}</h2>'
        f'{_scroller(title)}<table cellpadding="4" style="border-collapse:collapse">'
        f"{items}</table></div>"
    )


def _positions(rows: Sequence[PositionRow]) -> str:
    """Every keyword of the latest measurement (the shared page's table)."""
    if not rows:
        return ""
    body = "".join(
        f"<tr><td>{escape(r.keyword)}</td><td>{escape(r.device)}</td>"
        f"<td>{r.position if r.position is not None else '–'}</td>"
        f"<td>{r.previous if r.previous is not None else '–'}</td>"
        f"<td>{'+' if (r.delta or 0) > 0 else ''}{r.delta if r.delta is not None else ''}"
        f"{escape(r.change or '') if r.delta is None else ''}</td>"
        f"<td>{r.best if r.best is not None else '–'}</td></tr>"
        for r in rows
    )
    return (
        '<h2 style="margin:16px 0 4px;font-size:1.17em">Positions</h2>'
        f"{_scroller('Positions')}"
        '<table id="rt-shared-positions" cellpadding="4" style="border-collapse:collapse">'
        "<tr><th align=left scope=col>Keyword</th><th align=left scope=col>Device</th>"
        "<th align=left scope=col>Position</th><th align=left scope=col>Before</th>"
        "<th align=left scope=col>Change</th><th align=left scope=col>Best</th></tr>"
        f"{body}</table></div>"
    )


def report_html(
    schedule: Schedule,
    period: str,
    start: datetime,
    content: ReportContent,
    link: str | None,
    location: str | None,
    workspace: str | None,
    *,
    logo: InlineImage | None = None,
    span: str | None = None,
    positions: Sequence[PositionRow] = (),
) -> HtmlReport:
    """The report as one HTML document; ``logo`` (the workspace's) heads it, ``span`` replaces
    the period's name, ``positions`` adds the table of every keyword, and ``link`` (to the
    dashboard's page) is left out when None."""
    images: list[InlineImage] = [] if logo is None else [logo]
    parts = [_heading(schedule, location, workspace, logo, span or label(period, start))]
    if content.latest is None:
        parts.append("<p>No measurement in this period.</p>")
    else:
        parts.append(_summary(content))
        for block, image in _charts(content.trend):
            parts.append(block)
            images.append(image)
        parts += [
            _movers("Biggest gains", content.gains),
            _movers("Biggest losses", content.losses),
            _movers("Entered the ranking", content.entered),
            _movers("Dropped out of the ranking", content.dropped),
        ]
        if not (content.gains or content.losses or content.entered or content.dropped):
            parts.append("<p>No keyword moved.</p>")
        parts.append(_positions(positions))
    if link is not None:
        parts.append(f'<p><a href="{escape(link)}">Positions and charts</a></p>')
    parts.append("</main></body></html>")
    return HtmlReport(page="".join(parts), images=images)


def _heading(
    schedule: Schedule,
    location: str | None,
    workspace: str | None,
    logo: InlineImage | None,
    span: str,
) -> str:
    """The document's head and the report's title lines (under the logo, when there is one)."""
    where = ", ".join(part for part in (schedule.domain, location) if part)
    head = ""
    if logo is not None:
        head = (
            f'<img src="cid:{logo.content_id}" alt="{escape(workspace or "")} logo" '
            'height="48" style="max-height:48px;width:auto;display:block;margin:0 0 6px">'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Position report: {escape(schedule.name)}</title></head>"
        '<body style="font-family:Arial,sans-serif;color:#1f2328;'
        'max-width:600px;margin:0 auto;padding:12px"><main>'
        f"{head}"
        f'<p id="rt-report-workspace" style="color:#555;margin:0">{escape(workspace or "")}</p>'
        f'<h1 style="margin:4px 0;font-size:1.5em">Position report: {escape(schedule.name)}</h1>'
        f"<p>{escape(where)} · {escape(span)} (UTC)</p>"
    )


def _summary(content: ReportContent) -> str:
    """The latest measurement per device, each figure beside the one before the period."""
    assert content.latest is not None
    rows = "".join(
        f"<tr><td>{escape(s.device)}</td>"
        f"<td>{figure(s.average_position)}"
        + (
            f" (was {figure(content.before[s.device].average_position)})"
            if s.device in content.before
            else ""
        )
        + f"</td><td>{figure(s.visibility, ' %')}"
        + (
            f" (was {figure(content.before[s.device].visibility, ' %')})"
            if s.device in content.before
            else ""
        )
        + f"</td><td>{s.ranked} of {s.measured}</td></tr>"
        for s in content.summaries
    )
    return (
        f"<p>Latest measurement: {content.latest.measured_at:%Y-%m-%d}</p>"
        f"{_scroller('Summary')}"
        '<table cellpadding="4" style="border-collapse:collapse">'
        "<tr><th align=left>Device</th><th align=left>Average position</th>"
        "<th align=left>Visibility</th><th align=left>Ranked</th></tr>"
        f"{rows}</table></div>"
    )


def _charts(trend: Sequence[RunSummaryOut]) -> list[tuple[str, InlineImage]]:
    """The average position and visibility charts, each left out when nothing was measured."""
    made = (
        _chart(
            trend, "average_position", POSITION_CHART, "Average position", inverted=True, unit=""
        ),
        _chart(trend, "visibility", VISIBILITY_CHART, "Visibility", inverted=False, unit=" %"),
    )
    return [chart for chart in made if chart is not None]
