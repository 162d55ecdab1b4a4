"""What an e-mail report says about its period, shared by the text (:mod:`.report`) and the
HTML (:mod:`.report_html`) renderings, so that neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engines.ranktracking.reports.measurements import Column
from app.engines.ranktracking.reports.schemas import PositionRow, RunSummaryOut


@dataclass(frozen=True, slots=True)
class ReportContent:
    latest: Column | None
    baseline: Column | None
    summaries: list[RunSummaryOut]
    before: dict[str, RunSummaryOut]
    gains: list[PositionRow]
    losses: list[PositionRow]
    entered: list[PositionRow]
    dropped: list[PositionRow]
    trend: list[RunSummaryOut] = field(default_factory=list)
    """Every measurement of the period (after the one before it), for the report's charts."""


def figure(value: float | None, unit: str = "") -> str:
    """A summary figure as the report prints it (a dash when there is none)."""
    return "—" if value is None else f"{value:.2f}{unit}"
