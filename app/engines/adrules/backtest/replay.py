"""The replay (pure): a rule's tasks evaluated day by day over daily Insights, on a simulated
status and budget per object.

Each day of the range is one evaluation, at ``evaluate_at`` on the wall clock of the account's
zone, when that day's Insights are complete: ``today`` is the whole day, ``yesterday`` the day
before, and so on (:mod:`.window`). Task by task, as a run goes, every object's conditions are
evaluated by the engine's own :func:`~app.engines.adrules.work.evaluate.evaluate_conditions`; a
match then meets the same gates a run applies, with the same code: the task's cooldown
(:func:`~app.engines.adrules.work.cooldown.check_cooldown`), what Meta lets an action touch
(:func:`~app.engines.adrules.work.changes.not_deliverable_reason`), the change planned from the
simulated values with its clamps (:mod:`~app.engines.adrules.work.changes`), and, for a budget,
the cross-rule guard and Meta's changes per hour
(:func:`~app.engines.adrules.work.guards.check_budget_write`) counting the other rules' recorded
changes and the replay's own. What would have been written changes the simulated object — a pause
holds until an activation, a budget stays moved — so later days start from it.

The Insights are what was reported under the decisions actually taken: a paused object's later
days still show its real delivery. Their spend is what the pause would have saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from app.engines.adrules.backtest.aggregate import combine
from app.engines.adrules.backtest.window import period_days
from app.engines.adrules.payloads import CampaignEntity
from app.engines.adrules.schemas import (
    ActivateCampaign,
    AppendToName,
    DecreaseBudget,
    IncreaseBudget,
    LogOnly,
    NotifyEmail,
    NotifyWebhook,
    PauseCampaign,
    RemoveFromName,
    Rename,
    SetBudget,
    TaskDocument,
)
from app.engines.adrules.work.changes import (
    BUDGET_FIELDS,
    ActionFailed,
    Change,
    action_parameters,
    not_deliverable_reason,
    plan_budget,
    plan_name,
    plan_status,
)
from app.engines.adrules.work.cooldown import LastExecution, check_cooldown, next_permitted_at
from app.engines.adrules.work.evaluate import CampaignFacts, ConditionResult, evaluate_conditions
from app.engines.adrules.work.guards import BudgetChange, check_budget_write, direction
from app.engines.adrules.work.insights import plan_insights
from app.engines.adrules.work.metrics import InsightsRow, budget_to_major
from app.scheduling.zones import zone_or_utc

WOULD_EXECUTE = "would_execute"
SKIPPED = "skipped"
NOT_EXECUTED = "not_executed"
ERROR = "error"
HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class WouldAction:
    """A task whose conditions passed on one object at one evaluation, and what came of it."""

    day: date
    at: datetime
    object_id: str
    object_name: str
    task_id: int
    task_name: str
    action: str
    parameters: dict[str, Any]
    outcome: str
    """``would_execute``; ``skipped`` (cooldown, guard, an object Meta lets no change touch);
    ``not_executed`` (nothing to change: already paused, budget at its cap…); ``error``."""
    reason: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    conditions: list[ConditionResult]


@dataclass(slots=True)
class DayState:
    """One object at the end of one day's evaluation."""

    day: date
    status: str
    budget: Decimal | None
    """Daily budget (or lifetime budget, when it has no daily one) in major units."""
    spend: Decimal
    """What Meta reported it spent that day."""
    paused_spend: Decimal
    """That spend, when the replay had the object paused for the day (the pause saves it)."""
    matched: list[int]
    """Tasks whose conditions passed that day."""


@dataclass(slots=True)
class ObjectPath:
    id: str
    name: str
    start_status: str
    start_budget: Decimal | None
    days: list[DayState] = field(default_factory=list)

    @property
    def paused_spend(self) -> Decimal:
        return sum((d.paused_spend for d in self.days), Decimal(0))


@dataclass(slots=True)
class Replay:
    actions: list[WouldAction] = field(default_factory=list)
    paths: list[ObjectPath] = field(default_factory=list)
    evaluations: int = 0
    """Task evaluations (objects × days × tasks)."""
    matches: int = 0
    budget_raised: Decimal = Decimal(0)
    budget_lowered: Decimal = Decimal(0)


@dataclass(slots=True)
class _Sim:
    """An object as the replay has it: what the rule's writes would have made of it."""

    entity: CampaignEntity
    effective_status: str
    """Meta's delivery status as the replay's writes would have left it (``ACTIVE``,
    ``PAUSED``, …): the simulated object's, not a row's state."""
    daily_minor: int | None
    lifetime_minor: int | None
    name: str
    rows: Mapping[date, InsightsRow]
    cache: dict[tuple[date, date], InsightsRow | None] = field(default_factory=dict)
    pending: list[BudgetChange] = field(default_factory=list)
    """Budget changes this replay made on the object (the guard counts them)."""
    paused_by_rule: bool = False
    """The replay paused it (and has not activated it since): its spend is what that saves."""


@dataclass(frozen=True, slots=True)
class ReplayInput:
    rule_id: int
    rule_name: str
    level: str
    tasks: Sequence[TaskDocument]
    objects: Sequence[CampaignEntity]
    rows: Mapping[str, Mapping[date, InsightsRow]]
    """Per object, its daily rows (a day without a row had no delivery)."""
    currency: str
    day_zone: str
    """The ad account's zone: its Insights days and the evaluation instants."""
    clock_zone: str
    """The zone clock conditions and ``{date}`` read (the rule's, else the account's)."""
    days: Sequence[date]
    data_since: date
    """The first day read (``lifetime`` adds up from it)."""
    evaluate_at: time = time(23, 59)
    other_changes: Mapping[str, Sequence[BudgetChange]] = field(default_factory=dict)
    """Per object, the budget changes other rules recorded (oldest first)."""
    max_per_hour: int = 4


def evaluation_instant(day: date, at: time, zone: str) -> datetime:
    """``at`` on ``day`` on the zone's wall clock, in UTC."""
    return datetime.combine(day, at, tzinfo=zone_or_utc(zone)).astimezone(UTC)


def _facts(
    sim: _Sim, data: ReplayInput, day: date, now: datetime, periods: dict[str, frozenset[str]]
) -> CampaignFacts:
    rows: dict[str, InsightsRow | None] = {}
    for period, fields in periods.items():
        covered = period_days(period, day, data.data_since)
        assert covered is not None
        key = (covered[0], covered[1])
        if key not in sim.cache:
            first, last = covered
            picked = [
                row
                for offset in range((last - first).days + 1)
                if (row := sim.rows.get(first + timedelta(days=offset))) is not None
            ]
            sim.cache[key] = combine(picked, fields)
        rows[period] = sim.cache[key]
    return CampaignFacts(
        campaign_id=sim.entity.id,
        name=sim.name,
        now=now,
        timezone=data.clock_zone,
        daily_budget=budget_to_major(sim.daily_minor, data.currency),
        lifetime_budget=budget_to_major(sim.lifetime_minor, data.currency),
        created_time=sim.entity.created_time,
        rows=rows,
    )


def _start_status(
    entity: CampaignEntity, rows: Mapping[date, InsightsRow], days: Sequence[date]
) -> str:
    """The status the replay starts from: the one Meta lists now, except that an object paused
    now which delivered during the range was active then (a person paused it since)."""
    if (
        entity.effective_status == "PAUSED"
        and days
        and any(days[0] <= day <= days[-1] for day in rows)
    ):
        return "ACTIVE"
    return entity.effective_status


def _plan(task: TaskDocument, sim: _Sim, data: ReplayInput, now: datetime) -> Change | None:
    """The change the action would make from the simulated values (None: it changes nothing on
    Meta — a notification or ``log_only``)."""
    action = task.action
    if isinstance(action, PauseCampaign | ActivateCampaign):
        return plan_status(action, sim.effective_status)
    if isinstance(action, IncreaseBudget | DecreaseBudget | SetBudget):
        return plan_budget(
            action,
            sim.daily_minor,
            data.currency,
            lifetime_minor=sim.lifetime_minor,
            level=data.level,
        )
    if isinstance(action, Rename | AppendToName | RemoveFromName):
        local = now.astimezone(zone_or_utc(data.clock_zone))
        return plan_name(
            action,
            sim.name,
            rule=data.rule_name,
            date=f"{local:%Y-%m-%d}",
            campaign_id=sim.entity.id,
        )
    assert isinstance(action, LogOnly | NotifyEmail | NotifyWebhook)
    return None


def _relevant(changes: Sequence[BudgetChange], now: datetime) -> list[BudgetChange]:
    """The changes the guard reads at ``now``: made before it, and within the hour or still in
    their task's cooldown (the selection :func:`~app.engines.adrules.work.guards.budget_changes`
    makes in the database for a run)."""
    return [
        c
        for c in changes
        if c.at <= now and (c.at > now - HOUR or c.until is None or c.until > now)
    ]


def _apply(sim: _Sim, change: Change) -> None:
    write = change.write or {}
    if "status" in write:
        sim.effective_status = str(write["status"])
        sim.paused_by_rule = sim.effective_status == "PAUSED"
    if "daily_budget" in write:
        sim.daily_minor = int(write["daily_budget"])
    if "lifetime_budget" in write:
        sim.lifetime_minor = int(write["lifetime_budget"])
    if "name" in write:
        sim.name = str(write["name"])


def _budget_major(sim: _Sim, currency: str) -> Decimal | None:
    minor = sim.daily_minor if sim.daily_minor is not None else sim.lifetime_minor
    return budget_to_major(minor, currency)


def replay(data: ReplayInput) -> Replay:
    """Replay ``data.tasks`` on ``data.objects`` over ``data.days``."""
    out = Replay()
    periods = {p: frozenset(f) for p, f in plan_insights(data.tasks).fields.items()}
    sims = [
        _Sim(
            entity=o,
            effective_status=_start_status(o, data.rows.get(o.id, {}), data.days),
            daily_minor=o.daily_budget,
            lifetime_minor=o.lifetime_budget,
            name=o.name,
            rows=data.rows.get(o.id, {}),
        )
        for o in data.objects
    ]
    paths = {
        s.entity.id: ObjectPath(
            s.entity.id, s.entity.name, s.effective_status, _budget_major(s, data.currency)
        )
        for s in sims
    }
    last: dict[tuple[int, str], LastExecution] = {}
    for day in data.days:
        now = evaluation_instant(day, data.evaluate_at, data.day_zone)
        # The status the day was spent under is the one the previous evaluations left.
        paused_today = {s.entity.id: s.paused_by_rule for s in sims}
        matched: dict[str, list[int]] = {s.entity.id: [] for s in sims}
        for task in data.tasks:
            for sim in sims:
                out.evaluations += 1
                facts = _facts(sim, data, day, now, periods)
                evaluation = evaluate_conditions(task.conditions, task.group, facts)
                if not evaluation.passed:
                    continue
                out.matches += 1
                matched[sim.entity.id].append(task.id)
                out.actions.append(
                    _act(data, task, sim, evaluation.conditions, day, now, last, out)
                )
        for sim in sims:
            row = sim.rows.get(day)
            spend = row.spend if row is not None and row.spend is not None else Decimal(0)
            paths[sim.entity.id].days.append(
                DayState(
                    day=day,
                    status=sim.effective_status,
                    budget=_budget_major(sim, data.currency),
                    spend=spend,
                    paused_spend=spend if paused_today[sim.entity.id] else Decimal(0),
                    matched=matched[sim.entity.id],
                )
            )
    out.paths = list(paths.values())
    return out


def _act(
    data: ReplayInput,
    task: TaskDocument,
    sim: _Sim,
    conditions: list[ConditionResult],
    day: date,
    now: datetime,
    last: dict[tuple[int, str], LastExecution],
    out: Replay,
) -> WouldAction:
    """What one passing task would have done to one object at ``now`` (same gates as a run)."""

    def record(
        outcome: str,
        reason: str | None = None,
        before: dict[str, Any] | None = None,
        after: dict[str, Any] | None = None,
    ) -> WouldAction:
        return WouldAction(
            day=day,
            at=now,
            object_id=sim.entity.id,
            object_name=sim.name,
            task_id=task.id,
            task_name=task.name,
            action=str(type(task.action).__struct_config__.tag),
            parameters=action_parameters(task.action),
            outcome=outcome,
            reason=reason,
            before=before,
            after=after,
            conditions=conditions,
        )

    verdict = check_cooldown(last.get((task.id, sim.entity.id)), task.cooldown, now)
    if not verdict.allowed:
        return record(SKIPPED, verdict.reason)
    refused = not_deliverable_reason(task.action, sim.effective_status)
    if refused is not None:
        return record(SKIPPED, refused)
    try:
        change = _plan(task, sim, data, now)
    except ActionFailed as exc:
        return record(ERROR, f"the action failed: {exc}")
    if change is not None:
        if change.skip is not None:
            return record(SKIPPED, change.skip)
        if change.write is None:
            return record(NOT_EXECUTED, change.noop)
        refused = _guard(data, sim, change, now)
        if refused is not None:
            return record(SKIPPED, refused, change.before, change.after)
    nxt = next_permitted_at(now, task.cooldown)
    last[(task.id, sim.entity.id)] = LastExecution(now, nxt)
    if change is None:
        return record(WOULD_EXECUTE, "nothing is written to Meta by this action")
    if BUDGET_FIELDS & set(change.write or {}):
        _count_budget(data, sim, change, now, nxt, out)
    _apply(sim, change)
    return record(WOULD_EXECUTE, None, change.before, change.after)


def _guard(data: ReplayInput, sim: _Sim, change: Change, now: datetime) -> str | None:
    """The cross-rule guard and Meta's changes per hour, for a budget write."""
    if not BUDGET_FIELDS & set(change.write or {}):
        return None
    seen = _relevant([*data.other_changes.get(sim.entity.id, ()), *sim.pending], now)
    return check_budget_write(
        seen,
        rule_id=data.rule_id,
        planned_direction=direction(change.before, change.after),
        now=now,
        max_per_hour=data.max_per_hour,
    )


def _count_budget(
    data: ReplayInput,
    sim: _Sim,
    change: Change,
    now: datetime,
    nxt: datetime | None,
    out: Replay,
) -> None:
    """Keep a would-be budget change for the guard and add it to the budget moved."""
    sim.pending.append(
        BudgetChange(data.rule_id, data.rule_name, now, direction(change.before, change.after), nxt)
    )
    key = next(iter(change.before or {}))
    delta = Decimal(str((change.after or {})[key])) - Decimal(str((change.before or {})[key]))
    if delta > 0:
        out.budget_raised += delta
    else:
        out.budget_lowered -= delta
