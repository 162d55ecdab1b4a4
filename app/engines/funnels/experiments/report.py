"""The experiment report of a funnel, recomputed from runs, steps and contact events on every
read: per experiment branch entered / converted / rate / revenue with Wilson intervals and the
verdict (:mod:`~app.engines.funnels.experiments.stats`); for a funnel with a holdout, the control
group beside everyone else and the lift against it.

The unit is the contact: a contact counts once per experiment, in the branch of their first
pass, and converts when the goal follows that first pass within the experiment's window.
Contacts routed to a declared winner are shown but not counted by the verdict: they were not
assigned at random.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.definitions.funnel_settings import Holdout
from app.engines.funnels.definitions.graph import Experiment, Split, graph_for_version
from app.engines.funnels.experiments import stats
from app.engines.funnels.experiments.holdout import HOLDOUT_REASON
from app.engines.funnels.experiments.models import ExperimentWinner
from app.engines.funnels.experiments.routing import WINNER
from app.engines.funnels.models import ContactEvent, Funnel, FunnelVersion, Run, Step

PIECE = 500
"""Contacts per ``IN`` list when reading their events."""

AnySession = ReadSession | WriteSession


class GroupResult(msgspec.Struct, kw_only=True):
    name: str
    entered: int
    converted: int
    rate: float | None
    ci_low: float
    ci_high: float
    revenue_minor: int = 0
    revenue_per_entrant: float | None = None


class BranchResult(GroupResult, kw_only=True):
    weight: int = 0
    routed_to_winner: int = 0
    """Contacts sent here by a declared winner (not counted by the verdict)."""
    p_value: float | None = None
    """Against the best branch (none for the best branch itself)."""


class WinnerRecord(msgspec.Struct, kw_only=True):
    id: int
    branch: str
    decided_by: str
    decided_by_user: int | None
    reason: str
    decided_at: datetime
    reverted_at: datetime | None
    reverted_by_user: int | None


class ExperimentReport(msgspec.Struct, kw_only=True):
    node_id: str
    label: str
    goal: str
    """What converting means, in words."""
    window_days: int
    min_sample: int
    confidence: float
    auto_winner: bool
    branches: list[BranchResult]
    verdict: str
    """``collecting``, ``inconclusive`` or ``winner``."""
    verdict_message: str
    best: str | None
    verdict_winner: str | None
    alpha: float
    standing_winner: str | None
    history: list[WinnerRecord]


class HoldoutReport(msgspec.Struct, kw_only=True):
    percent: float
    goal_event: str
    window_days: int
    control: GroupResult
    treated: GroupResult
    lift: float | None
    """Relative lift of the treated rate over the control rate."""
    p_value: float | None


class ExperimentsReport(msgspec.Struct, kw_only=True):
    funnel_id: int
    experiments: list[ExperimentReport]
    holdout: HoldoutReport | None


async def experiment_definitions(
    session: AnySession, funnel: Funnel
) -> tuple[list[tuple[Split, Experiment]], Holdout | None]:
    """The experiments of the funnel's published versions (the newest definition of each split
    wins) and the newest version's holdout."""
    versions = list(
        await session.scalars(
            select(FunnelVersion)
            .where(FunnelVersion.funnel_id == funnel.id)
            .order_by(FunnelVersion.number)
        )
    )
    found: dict[str, tuple[Split, Experiment]] = {}
    holdout: Holdout | None = None
    for version in versions:
        graph = graph_for_version(version.id, version.definition)
        for node in graph.definition.nodes:
            if isinstance(node, Split) and node.experiment is not None:
                found[node.id] = (node, node.experiment)
        holdout = graph.definition.settings.holdout
    return list(found.values()), holdout


async def experiments_report(session: AnySession, funnel: Funnel) -> ExperimentsReport:
    experiments, holdout = await experiment_definitions(session, funnel)
    reports = [await experiment_report(session, funnel, node, exp) for node, exp in experiments]
    return ExperimentsReport(
        funnel_id=funnel.id,
        experiments=reports,
        holdout=None if holdout is None else await holdout_report(session, funnel, holdout),
    )


def _group(
    name: str, entered: int, converted: int, revenue: int, confidence: float
) -> dict[str, Any]:
    low, high = stats.wilson_interval(converted, entered, confidence)
    return {
        "name": name,
        "entered": entered,
        "converted": converted,
        "rate": converted / entered if entered else None,
        "ci_low": low,
        "ci_high": high,
        "revenue_minor": revenue,
        "revenue_per_entrant": revenue / entered if entered else None,
    }


async def experiment_report(
    session: AnySession, funnel: Funnel, node: Split, exp: Experiment
) -> ExperimentReport:
    first = await _first_passes(session, funnel.id, node.id)
    window = timedelta(days=exp.window_days)
    conversions = await _conversions(
        session, funnel, exp, {cid: at for cid, (at, _, _) in first.items()}, window
    )
    entered: dict[str, int] = {b.name: 0 for b in node.branches}
    converted: dict[str, int] = dict.fromkeys(entered, 0)
    revenue: dict[str, int] = dict.fromkeys(entered, 0)
    routed: dict[str, int] = dict.fromkeys(entered, 0)
    for contact_id, (_, branch, assignment) in first.items():
        if branch not in entered:
            continue  # a branch a later version removed
        if assignment == WINNER:
            routed[branch] += 1
            continue
        entered[branch] += 1
        if contact_id in conversions:
            converted[branch] += 1
            revenue[branch] += conversions[contact_id]
    groups = {name: (converted[name], entered[name]) for name in entered}
    verdict = stats.verdict(groups, min_sample=exp.min_sample, confidence=exp.confidence)
    history = await winner_history(session, funnel.id, node.id)
    standing = next((h.branch for h in history if h.reverted_at is None), None)
    return ExperimentReport(
        node_id=node.id,
        label=node.label or node.id,
        goal=_goal_words(exp),
        window_days=exp.window_days,
        min_sample=exp.min_sample,
        confidence=exp.confidence,
        auto_winner=exp.auto_winner,
        branches=[
            BranchResult(
                **_group(
                    b.name, entered[b.name], converted[b.name], revenue[b.name], exp.confidence
                ),
                weight=b.weight,
                routed_to_winner=routed[b.name],
                p_value=verdict.p_values.get(b.name),
            )
            for b in node.branches
        ],
        verdict=verdict.state,
        verdict_message=verdict.message,
        best=verdict.best,
        verdict_winner=verdict.winner,
        alpha=verdict.alpha,
        standing_winner=standing,
        history=history,
    )


def _goal_words(exp: Experiment) -> str:
    if exp.goal_node is not None:
        return f"reaching the goal '{exp.goal_node}' within {exp.window_days} days"
    value = f", revenue from '{exp.value_property}'" if exp.value_property else ""
    return f"the event '{exp.goal_event}' within {exp.window_days} days{value}"


async def winner_history(session: AnySession, funnel_id: int, node_id: str) -> list[WinnerRecord]:
    rows = await session.scalars(
        select(ExperimentWinner)
        .where(ExperimentWinner.funnel_id == funnel_id, ExperimentWinner.node_id == node_id)
        .order_by(ExperimentWinner.decided_at.desc(), ExperimentWinner.id.desc())
    )
    return [
        WinnerRecord(
            id=r.id,
            branch=r.branch,
            decided_by=r.decided_by,
            decided_by_user=r.decided_by_user,
            reason=r.reason,
            decided_at=r.decided_at,
            reverted_at=r.reverted_at,
            reverted_by_user=r.reverted_by_user,
        )
        for r in rows
    ]


async def _first_passes(
    session: AnySession, funnel_id: int, node_id: str
) -> dict[int, tuple[datetime, str, str]]:
    """Contact -> (time, branch, assignment) of their first pass through the split."""
    rows = await session.execute(
        select(Run.contact_id, Step.at, Step.output)
        .join(Run, Run.id == Step.run_id)
        .where(Run.funnel_id == funnel_id, Step.node_id == node_id, Step.kind == "split")
        .order_by(Step.at, Step.id)
    )
    first: dict[int, tuple[datetime, str, str]] = {}
    for contact_id, at, output in rows:
        if contact_id in first:
            continue
        output = output or {}
        first[contact_id] = (at, str(output.get("branch", "")), str(output.get("assignment", "")))
    return first


async def _conversions(
    session: AnySession,
    funnel: Funnel,
    exp: Experiment,
    since: dict[int, datetime],
    window: timedelta,
) -> dict[int, int]:
    """Contact -> revenue (minor units) for every contact who converted after ``since``."""
    out: dict[int, int] = {}
    if exp.goal_node is not None:
        rows = await session.execute(
            select(Run.contact_id, Step.at)
            .join(Run, Run.id == Step.run_id)
            .where(Run.funnel_id == funnel.id, Step.node_id == exp.goal_node, Step.kind == "goal")
        )
        for contact_id, at in rows:
            start = since.get(contact_id)
            if start is not None and start <= at <= start + window:
                out[contact_id] = exp.value_minor
        return out
    assert exp.goal_event is not None
    async for contact_id, at, properties in _events(
        session, funnel.workspace_id, exp.goal_event, since.keys()
    ):
        start = since[contact_id]
        if start <= at <= start + window:
            value = (properties or {}).get(exp.value_property) if exp.value_property else None
            amount = (
                int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
            )
            out[contact_id] = out.get(contact_id, 0) + amount
    return out


async def _events(
    session: AnySession, workspace_id: int, name: str, contact_ids: Iterable[int]
) -> Any:
    ids = sorted(contact_ids)
    for start in range(0, len(ids), PIECE):
        rows = await session.execute(
            scoped_select(
                ContactEvent,
                workspace_id,
                ContactEvent.contact_id,
                ContactEvent.occurred_at,
                ContactEvent.properties,
            ).where(
                ContactEvent.name == name, ContactEvent.contact_id.in_(ids[start : start + PIECE])
            )
        )
        for row in rows:
            yield row


async def holdout_report(session: AnySession, funnel: Funnel, holdout: Holdout) -> HoldoutReport:
    """Control (held out) against everyone else who entered, on the holdout's goal event."""
    rows = await session.execute(
        select(Run.contact_id, Run.entered_at, Run.exit_reason)
        .where(Run.funnel_id == funnel.id)
        .order_by(Run.entered_at, Run.id)
    )
    first: dict[int, tuple[datetime, bool]] = {}
    for contact_id, entered_at, reason in rows:
        if contact_id not in first:
            first[contact_id] = (entered_at, reason == HOLDOUT_REASON)
    window = timedelta(days=holdout.window_days)
    converted: set[int] = set()
    async for contact_id, at, _ in _events(
        session, funnel.workspace_id, holdout.goal_event, first.keys()
    ):
        start = first[contact_id][0]
        if start <= at <= start + window:
            converted.add(contact_id)
    counts = {True: [0, 0], False: [0, 0]}
    for contact_id, (_, held) in first.items():
        counts[held][0] += 1
        counts[held][1] += contact_id in converted
    (cn, cx), (tn, tx) = counts[True], counts[False]
    control = GroupResult(**_group("control", cn, cx, 0, 0.95))
    treated = GroupResult(**_group("in the funnel", tn, tx, 0, 0.95))
    test = stats.two_proportion_z(tx, tn, cx, cn)
    return HoldoutReport(
        percent=holdout.percent,
        goal_event=holdout.goal_event,
        window_days=holdout.window_days,
        control=control,
        treated=treated,
        lift=stats.lift(treated.rate, control.rate),
        p_value=None if test is None else test.p_value,
    )
