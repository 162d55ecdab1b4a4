"""Rules a rule document must keep beyond its types: each broken one is reported with its field path.

msgspec already refuses unknown metrics, operators, periods, actions and malformed values while
decoding; what remains are rules across fields (a budget increase needs a ceiling, a window must not
end before it starts…). Every problem is collected, so a person fixes them all in one pass.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.engines.adrules.catalogue import (
    ATTRIBUTION_WINDOWS,
    CLICK_WINDOWS,
    RETIRED_WINDOWS,
)
from app.engines.adrules.schemas import (
    ClockCondition,
    CustomMetricCondition,
    DecreaseBid,
    DecreaseBudget,
    IncreaseBid,
    IncreaseBudget,
    MetricMetricCondition,
    MetricValueCondition,
    NotifyEmail,
    NotifyWebhook,
    RuleIn,
    SetBid,
    SetBudget,
    TaskIn,
    TimetableSchedule,
)
from app.errors import ValidationFailed

MAX_TASKS = 20
MAX_CONDITIONS = 20
MAX_PERCENT = Decimal(1000)


class Problems:
    """Collects ``{"field", "message", "code"}`` details."""

    def __init__(self) -> None:
        self.details: list[dict[str, Any]] = []

    def add(self, field: str, message: str, code: str = "invalid") -> None:
        self.details.append({"field": field, "message": message, "code": code})

    def raise_if_any(self) -> None:
        if self.details:
            first = self.details[0]
            raise ValidationFailed(
                f"{first['field']}: {first['message']}", details=list(self.details)
            )


def _finite(value: Decimal) -> bool:
    return value.is_finite()


def _check_number(problems: Problems, field: str, value: Decimal) -> None:
    if not _finite(value):
        problems.add(field, "must be a finite number")


def check_task(problems: Problems, task: TaskIn, at: str) -> None:
    """Validate one task; ``at`` is its path (``tasks[0]``)."""
    if not task.conditions:
        problems.add(f"{at}.conditions", "a task needs at least one condition", "required")
    if len(task.conditions) > MAX_CONDITIONS:
        problems.add(f"{at}.conditions", f"at most {MAX_CONDITIONS} conditions per task")
    for i, cond in enumerate(task.conditions):
        where = f"{at}.conditions[{i}]"
        if (
            isinstance(cond, MetricValueCondition | MetricMetricCondition)
            and cond.metric == "custom_metric"
        ):
            problems.add(
                f"{where}.metric",
                "custom metrics need a custom_metric condition (spreadsheet and columns)",
            )
        if isinstance(cond, MetricValueCondition):
            _check_number(problems, f"{where}.value", cond.value)
        elif isinstance(cond, MetricMetricCondition):
            if cond.other_metric == "custom_metric":
                problems.add(
                    f"{where}.other_metric",
                    "custom metrics need a custom_metric condition (spreadsheet and columns)",
                )
            _check_number(problems, f"{where}.multiplier", cond.multiplier)
            if cond.multiplier.is_finite() and cond.multiplier <= 0:
                problems.add(f"{where}.multiplier", "must be greater than 0")
        elif isinstance(cond, CustomMetricCondition):
            _check_number(problems, f"{where}.value", cond.value)
            if cond.lookup_column == cond.value_column:
                problems.add(f"{where}.value_column", "must differ from the lookup column")
        elif isinstance(cond, ClockCondition) and len(set(cond.hours)) != len(cond.hours):
            problems.add(f"{where}.hours", "lists an hour twice")
    _check_action(problems, task, f"{at}.action")


def _check_action(problems: Problems, task: TaskIn, at: str) -> None:
    action = task.action
    if isinstance(action, IncreaseBid | DecreaseBid | SetBid):
        _check_bid(problems, action, at)
        return
    if isinstance(action, IncreaseBudget | DecreaseBudget | SetBudget):
        _check_number(problems, f"{at}.amount", action.amount)
        if action.amount.is_finite() and action.amount <= 0:
            problems.add(f"{at}.amount", "must be greater than 0")
    if (
        isinstance(action, IncreaseBudget | DecreaseBudget)
        and action.by == "percent"
        and action.amount.is_finite()
        and action.amount > MAX_PERCENT
    ):
        problems.add(f"{at}.amount", f"a percentage of at most {MAX_PERCENT}")
    if isinstance(action, IncreaseBudget):
        if action.max is None:
            problems.add(f"{at}.max", "a budget increase needs a maximum", "required")
        else:
            _check_number(problems, f"{at}.max", action.max)
            if action.max.is_finite() and action.max <= 0:
                problems.add(f"{at}.max", "must be greater than 0")
    if isinstance(action, DecreaseBudget):
        if action.min is None:
            problems.add(f"{at}.min", "a budget decrease needs a minimum", "required")
        else:
            _check_number(problems, f"{at}.min", action.min)
            if action.min.is_finite() and action.min < 0:
                problems.add(f"{at}.min", "must not be negative")


def _check_bid(problems: Problems, action: IncreaseBid | DecreaseBid | SetBid, at: str) -> None:
    """A bid action's amounts, in the words of a media buyer (spec AR-40)."""
    what = "bid" if isinstance(action, SetBid) else "change"
    _check_number(problems, f"{at}.amount", action.amount)
    if action.amount.is_finite() and action.amount <= 0:
        problems.add(f"{at}.amount", f"the {what} must be greater than 0")
    if (
        isinstance(action, IncreaseBid | DecreaseBid)
        and action.by == "percent"
        and action.amount.is_finite()
        and action.amount > MAX_PERCENT
    ):
        problems.add(f"{at}.amount", f"a percentage of at most {MAX_PERCENT}")
    if isinstance(action, IncreaseBid):
        if action.max is None:
            problems.add(
                f"{at}.max",
                "a bid increase needs a maximum bid: the highest bid or cost cap it may set",
                "required",
            )
        else:
            _check_number(problems, f"{at}.max", action.max)
            if action.max.is_finite() and action.max <= 0:
                problems.add(f"{at}.max", "the maximum bid must be greater than 0")
    if isinstance(action, DecreaseBid):
        if action.min is None:
            problems.add(
                f"{at}.min",
                "a bid decrease needs a minimum bid: the lowest bid or cost cap it may set",
                "required",
            )
        else:
            _check_number(problems, f"{at}.min", action.min)
            if action.min.is_finite() and action.min <= 0:
                problems.add(
                    f"{at}.min", "the minimum bid must be greater than 0 (Meta refuses a bid of 0)"
                )


BID_LEVEL = (
    "bids and cost caps are set on ad sets (Meta's bid_amount): use a rule at ad-set level; "
    "a campaign only chooses the bid strategy its ad sets follow"
)


def check_attribution(problems: Problems, windows: list[str] | None) -> None:
    """The rule's attribution windows: Meta's documented values, one click window at most (spec
    AR-41)."""
    if windows is None:
        return
    if not windows:
        problems.add(
            "attribution_windows",
            "choose at least one window, or leave the field out to use each ad set's own "
            "attribution setting",
        )
        return
    for i, window in enumerate(windows):
        if window in RETIRED_WINDOWS:
            problems.add(
                f"attribution_windows[{i}]",
                f"Meta no longer reports the {window} window (retired in January 2026): "
                "use 1d_view",
                "retired",
            )
        elif window not in ATTRIBUTION_WINDOWS:
            problems.add(
                f"attribution_windows[{i}]",
                f"unknown attribution window {window!r}: choose from "
                + ", ".join(ATTRIBUTION_WINDOWS),
            )
    if len(set(windows)) != len(windows):
        problems.add("attribution_windows", "lists a window twice")
    clicks = [w for w in windows if w in CLICK_WINDOWS]
    if len(clicks) > 1:
        problems.add(
            "attribution_windows",
            f"choose one click window, not {len(clicks)} ({', '.join(clicks)}): a longer "
            "click window already counts the shorter one's conversions",
        )


def check_schedule(problems: Problems, rule: RuleIn) -> None:
    schedule = rule.schedule
    if isinstance(schedule, TimetableSchedule) and schedule.week.is_empty():
        problems.add("schedule.week", "the timetable needs at least one time", "required")
    if (
        schedule.start_date is not None
        and schedule.end_date is not None
        and schedule.end_date < schedule.start_date
    ):
        problems.add("schedule.end_date", "ends before the start date")


def is_zone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone this machine knows."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def check_rule(rule: RuleIn) -> None:
    """Raise :class:`ValidationFailed` naming every broken field of ``rule``."""
    problems = Problems()
    if not rule.name.strip():
        problems.add("name", "must not be blank", "required")
    if not rule.tasks:
        problems.add("tasks", "a rule needs at least one task", "required")
    if len(rule.tasks) > MAX_TASKS:
        problems.add("tasks", f"at most {MAX_TASKS} tasks per rule")
    seen_ids: set[int] = set()
    for i, task in enumerate(rule.tasks):
        if task.id is not None:
            if task.id in seen_ids:
                problems.add(f"tasks[{i}].id", "the same task appears twice")
            seen_ids.add(task.id)
        check_task(problems, task, f"tasks[{i}]")
        check_action_level(problems, rule.level, task, f"tasks[{i}].action")
    check_attribution(problems, rule.attribution_windows)
    check_schedule(problems, rule)
    if rule.approval is not None and rule.approval.required and rule.status == "shadow":
        # A shadow rule writes nothing, so there is nothing to approve.
        problems.add("approval", "a shadow rule writes nothing: approval applies to active rules")
    if rule.approval is not None and rule.approval.required and not _notifies(rule):
        # The run's digest is what asks: without a channel the proposals would wait unseen.
        problems.add(
            "approval",
            "nobody would be asked: add a task that notifies (e-mail, Slack, Teams or a "
            "webhook); its message carries the approval link",
            "approval_needs_notice",
        )
    if rule.schedule.timezone is not None and not is_zone(rule.schedule.timezone):
        problems.add("schedule.timezone", f"unknown time zone {rule.schedule.timezone!r}")
    if len(set(rule.account_ids)) != len(rule.account_ids):
        problems.add("account_ids", "lists an ad account twice")
    prefilters = rule.prefilters
    if prefilters.name_contains is not None and not prefilters.name_contains.strip():
        problems.add("prefilters.name_contains", "must not be blank (leave it out instead)")
    problems.raise_if_any()


def _notifies(rule: RuleIn) -> bool:
    return any(isinstance(task.action, NotifyEmail | NotifyWebhook) for task in rule.tasks)


def check_action_level(problems: Problems, level: str, task: TaskIn, path: str) -> None:
    """Budgets live on campaigns and ad sets, bids on ad sets only."""
    if level == "ad" and isinstance(task.action, IncreaseBudget | DecreaseBudget | SetBudget):
        problems.add(
            path,
            "an ad has no budget: act on budgets at campaign or ad-set level",
            "budget_not_at_level",
        )
    if level != "adset" and isinstance(task.action, IncreaseBid | DecreaseBid | SetBid):
        problems.add(path, BID_LEVEL, "bid_not_at_level")


def check_single_task(task: TaskIn) -> None:
    problems = Problems()
    check_task(problems, task, "task")
    problems.raise_if_any()
