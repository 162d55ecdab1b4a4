"""Outcomes per version: goal rate (with its Wilson interval), conversion windows (reached a goal
within N days of entering) and how runs ended; and the comparison of two versions, the goal
rate's difference judged by the same two-proportion z-test as experiments."""

from __future__ import annotations

from datetime import timedelta

import msgspec

from app.engines.funnels.analytics.series import ENDED_EARLY, FunnelTraces, RunTrace
from app.engines.funnels.experiments import stats

DEFAULT_WINDOWS = (1, 7, 30)
OUTCOMES = ("active", "completed", "exited", "cancelled", "failed")


class WindowRate(msgspec.Struct, kw_only=True):
    days: int
    converted: int
    rate: float | None


class VersionOutcome(msgspec.Struct, kw_only=True):
    version: int
    entered: int
    goal_reached: int
    goal_rate: float | None
    goal_rate_low: float
    goal_rate_high: float
    windows: list[WindowRate]
    outcomes: dict[str, int]
    """Runs by how they stand: active, completed, exited, cancelled, failed."""


class OutcomesReport(msgspec.Struct, kw_only=True):
    funnel_id: int
    versions: list[VersionOutcome]


class OutcomeDifference(msgspec.Struct, kw_only=True):
    outcome: str
    a_rate: float | None
    b_rate: float | None
    difference: float | None
    """``b_rate - a_rate``."""


class VersionComparison(msgspec.Struct, kw_only=True):
    funnel_id: int
    a: VersionOutcome
    b: VersionOutcome
    goal_rate_difference: float | None
    """``b.goal_rate - a.goal_rate``."""
    goal_rate_lift: float | None
    p_value: float | None
    significant: bool
    confidence: float
    outcomes: list[OutcomeDifference]


def version_outcomes(
    traces: FunnelTraces, funnel_id: int, windows: tuple[int, ...] = DEFAULT_WINDOWS
) -> OutcomesReport:
    by_version: dict[int, list[RunTrace]] = {vid: [] for vid in traces.versions}
    for run in traces.runs:
        by_version.setdefault(run.version_id, []).append(run)
    out = []
    for vid, (number, _) in sorted(traces.versions.items(), key=lambda kv: kv[1][0]):
        runs = by_version.get(vid, [])
        entered = len(runs)
        delays = [run.goal_at - run.entered_at for run in runs if run.goal_at is not None]
        reached = len(delays)
        low, high = stats.wilson_interval(reached, entered)
        outcomes = dict.fromkeys(OUTCOMES, 0)
        for run in runs:
            outcomes[run.status] = outcomes.get(run.status, 0) + 1
        out.append(
            VersionOutcome(
                version=number,
                entered=entered,
                goal_reached=reached,
                goal_rate=reached / entered if entered else None,
                goal_rate_low=low,
                goal_rate_high=high,
                windows=[
                    WindowRate(
                        days=n,
                        converted=(c := sum(1 for d in delays if d <= timedelta(days=n))),
                        rate=c / entered if entered else None,
                    )
                    for n in windows
                ],
                outcomes=outcomes,
            )
        )
    return OutcomesReport(funnel_id=funnel_id, versions=out)


def compare(
    a: VersionOutcome, b: VersionOutcome, funnel_id: int, confidence: float = 0.95
) -> VersionComparison:
    test = stats.two_proportion_z(b.goal_reached, b.entered, a.goal_reached, a.entered)
    diff = None if a.goal_rate is None or b.goal_rate is None else b.goal_rate - a.goal_rate

    def share(v: VersionOutcome, outcome: str) -> float | None:
        return v.outcomes.get(outcome, 0) / v.entered if v.entered else None

    differences = []
    for outcome in (*OUTCOMES, "goal"):
        ra = a.goal_rate if outcome == "goal" else share(a, outcome)
        rb = b.goal_rate if outcome == "goal" else share(b, outcome)
        differences.append(
            OutcomeDifference(
                outcome=outcome,
                a_rate=ra,
                b_rate=rb,
                difference=None if ra is None or rb is None else rb - ra,
            )
        )
    return VersionComparison(
        funnel_id=funnel_id,
        a=a,
        b=b,
        goal_rate_difference=diff,
        goal_rate_lift=stats.lift(b.goal_rate, a.goal_rate),
        p_value=None if test is None else test.p_value,
        significant=test is not None and test.p_value < 1 - confidence,
        confidence=confidence,
        outcomes=differences,
    )


__all__ = ["ENDED_EARLY", "compare", "version_outcomes"]
