"""Journey analytics over time, recomputed from runs and steps on every read (as the funnel
report is): nothing is counted in place, so a re-executed node cannot inflate a figure.

Per version and per node, one point per UTC day:

- ``entered``: runs that executed the node that day (a run that loops counts once a day);
- ``waiting``: runs still active at the end of the day whose last step by then was at the node;
- ``exited``: runs that ended early there that day (exited, cancelled, failed);
- ``converted``: runs that passed the node and reached a goal that day.

The version's own line (``node_id`` ``None``) counts runs: entered the funnel, active at the end
of the day, ended early, reached a goal. Held-out contacts are left out (they walked nothing;
the experiment report counts them).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

import msgspec
from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.funnels.experiments.holdout import HOLDOUT_REASON
from app.engines.funnels.models import FunnelVersion, Run, Step

ENDED_EARLY = frozenset({"exited", "cancelled", "failed"})
MAX_DAYS = 366


class DayPoint(msgspec.Struct, kw_only=True):
    day: date
    entered: int = 0
    waiting: int = 0
    exited: int = 0
    converted: int = 0


class NodeSeries(msgspec.Struct, kw_only=True):
    node_id: str | None
    """``None``: the version's own line (runs)."""
    kind: str
    days: list[DayPoint]


class VersionSeries(msgspec.Struct, kw_only=True):
    version: int
    nodes: list[NodeSeries]


class SeriesReport(msgspec.Struct, kw_only=True):
    funnel_id: int
    start: date
    end: date
    versions: list[VersionSeries]


@dataclass(slots=True)
class RunTrace:
    """One run and its steps in time order: what every analytics figure is computed from."""

    id: int
    version_id: int
    entered_at: datetime
    ended_at: datetime | None
    status: str
    current_node: str
    steps: list[tuple[datetime, str, str]] = field(default_factory=list)
    """``(at, node id, kind)``."""

    @property
    def goal_at(self) -> datetime | None:
        return next((at for at, _, kind in self.steps if kind == "goal"), None)


@dataclass(slots=True)
class FunnelTraces:
    versions: dict[int, tuple[int, list[tuple[str, str]]]]
    """Version id -> (number, [(node id, kind)] in the definition's order)."""
    runs: list[RunTrace]


async def load_traces(session: ReadSession, funnel_id: int) -> FunnelTraces:
    """The funnel's versions, runs (held-out ones left out) and their steps."""
    versions: dict[int, tuple[int, list[tuple[str, str]]]] = {}
    for version in await session.scalars(
        select(FunnelVersion).where(FunnelVersion.funnel_id == funnel_id)
    ):
        nodes = [
            (str(raw["id"]), str(raw.get("kind", "")))
            for raw in (version.definition or {}).get("nodes") or []
            if isinstance(raw, dict) and isinstance(raw.get("id"), str)
        ]
        versions[version.id] = (version.number, nodes)
    runs: dict[int, RunTrace] = {}
    for row in await session.execute(
        select(
            Run.id,
            Run.version_id,
            Run.entered_at,
            Run.ended_at,
            Run.status,
            Run.current_node,
            Run.exit_reason,
        ).where(Run.funnel_id == funnel_id)
    ):
        if row.exit_reason == HOLDOUT_REASON:
            continue
        runs[row.id] = RunTrace(
            row.id, row.version_id, row.entered_at, row.ended_at, row.status, row.current_node
        )
    for run_id, at, node_id, kind in await session.execute(
        select(Step.run_id, Step.at, Step.node_id, Step.kind)
        .join(Run, Run.id == Step.run_id)
        .where(Run.funnel_id == funnel_id)
        .order_by(Step.run_id, Step.seq)
    ):
        trace = runs.get(run_id)
        if trace is not None:
            trace.steps.append((at, node_id, kind))
    return FunnelTraces(versions, list(runs.values()))


def day_of(at: datetime) -> date:
    return at.astimezone(UTC).date()


def end_of(day: date) -> datetime:
    """The last instant of a UTC day (figures 'at the end of the day' are taken then)."""
    return datetime.combine(day + timedelta(days=1), time(0), UTC) - timedelta(microseconds=1)


class _Grid:
    """(version id, node id | None) -> one counter per day, filled run by run."""

    def __init__(self, start: date, end: date) -> None:
        self.days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
        self.index = {d: i for i, d in enumerate(self.days)}
        self.ends = [end_of(d) for d in self.days]
        self.cells: dict[tuple[int, str | None], list[DayPoint]] = {}

    def points(self, version_id: int, node_id: str | None) -> list[DayPoint]:
        key = (version_id, node_id)
        if key not in self.cells:
            self.cells[key] = [DayPoint(day=d) for d in self.days]
        return self.cells[key]

    def at(self, version_id: int, node_id: str | None, moment: datetime) -> DayPoint | None:
        """The day's point of ``moment``, or ``None`` outside the range."""
        i = self.index.get(day_of(moment))
        return None if i is None else self.points(version_id, node_id)[i]

    def add_run(self, run: RunTrace) -> None:
        v = run.version_id
        for step_node, day in {(n, day_of(at)) for at, n, _ in run.steps}:
            if day in self.index:
                self.points(v, step_node)[self.index[day]].entered += 1
        if (point := self.at(v, None, run.entered_at)) is not None:
            point.entered += 1
        goal_at = run.goal_at
        if goal_at is not None and self.at(v, None, goal_at) is not None:
            walked: set[str | None] = {None, *(n for at, n, _ in run.steps if at <= goal_at)}
            for node_id in walked:
                self.points(v, node_id)[self.index[day_of(goal_at)]].converted += 1
        if run.status in ENDED_EARLY and run.ended_at is not None:
            ended_at: tuple[str | None, ...] = (None, run.current_node)
            for where in ended_at:
                if (point := self.at(v, where, run.ended_at)) is not None:
                    point.exited += 1
        self.add_waiting(run)

    def add_waiting(self, run: RunTrace) -> None:
        """Add the run to ``waiting`` of each day it was still active at the end of, on the
        version's line and at the node of its last step by then."""
        times = [at for at, _, _ in run.steps]
        own = self.points(run.version_id, None)
        for i, moment in enumerate(self.ends):
            if run.entered_at > moment:
                continue
            if run.ended_at is not None and run.ended_at <= moment:
                break
            own[i].waiting += 1
            last = bisect.bisect_right(times, moment) - 1
            if last >= 0:
                self.points(run.version_id, run.steps[last][1])[i].waiting += 1


def daily_series(traces: FunnelTraces, funnel_id: int, start: date, end: date) -> SeriesReport:
    """Per version and node, one :class:`DayPoint` per day from ``start`` to ``end``."""
    grid = _Grid(start, end)
    for run in traces.runs:
        grid.add_run(run)
    versions = []
    for version_id, (number, nodes) in sorted(traces.versions.items(), key=lambda kv: kv[1][0]):
        order = [n for n, _ in nodes]
        kinds = dict(nodes)
        series = [NodeSeries(node_id=None, kind="funnel", days=grid.points(version_id, None))]
        # Nodes a run walked that the version's definition does not list come last.
        extra = sorted(
            n for (v, n) in grid.cells if v == version_id and n is not None and n not in order
        )
        for node_id in [*order, *extra]:
            series.append(
                NodeSeries(
                    node_id=node_id,
                    kind=kinds.get(node_id, ""),
                    days=grid.points(version_id, node_id),
                )
            )
        versions.append(VersionSeries(version=number, nodes=series))
    return SeriesReport(funnel_id=funnel_id, start=start, end=end, versions=versions)


def series_csv_rows(report: SeriesReport) -> list[list[str]]:
    """The series as CSV rows (a header first): one row per version, node and day."""
    rows = [["version", "node_id", "node_kind", "day", "entered", "waiting", "exited", "converted"]]
    for version in report.versions:
        for node in version.nodes:
            for p in node.days:
                rows.append(
                    [
                        str(version.version),
                        node.node_id or "(all runs)",
                        node.kind,
                        p.day.isoformat(),
                        str(p.entered),
                        str(p.waiting),
                        str(p.exited),
                        str(p.converted),
                    ]
                )
    return rows
