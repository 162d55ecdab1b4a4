"""A backtest's request and its answer (the API's and the dashboard's)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any

import msgspec

from app.engines.adrules.schemas import RuleIn, TimeOfDay
from app.schemas import RowRef, Schema

ESTIMATE_NOTE = (
    "An estimate: Insights are what happened under the old decisions. The replay applies the "
    "rule to what was delivered then; it cannot know how delivery would have changed after a "
    "pause or a budget change it would have made."
)


class BacktestIn(Schema, kw_only=True):
    """Replay a saved rule over ``since`` … ``until`` (days of each ad account's zone)."""

    since: date
    until: date
    account_ids: Annotated[list[RowRef], msgspec.Meta(max_length=20)] = []
    """Ad accounts to replay on (of the rule's, or any of the workspace's for an unsaved rule);
    left out: every ad account the rule covers."""
    evaluate_at: TimeOfDay = "23:59"
    """The local time of each day's evaluation (clock conditions read it); Insights are always
    the day's complete ones."""


class BacktestDocumentIn(BacktestIn, kw_only=True):
    """Replay a rule not saved yet: ``rule`` is the document ``POST /rules`` takes."""

    rule: RuleIn


class BacktestCondition(Schema, kw_only=True):
    text: str
    seen: str | None
    compared: str | None
    passed: bool
    reason: str | None = None


class BacktestAction(Schema, kw_only=True):
    """A task whose conditions passed on one object at one day's evaluation."""

    day: date
    at: datetime
    account_id: int
    object_id: str
    object_name: str
    task_id: int
    task_name: str
    action: str
    parameters: dict[str, Any]
    outcome: str
    """``would_execute``, ``skipped`` (cooldown, cross-rule guard, an archived object),
    ``not_executed`` (nothing to change) or ``error``."""
    reason: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    conditions: list[BacktestCondition] = []


class BacktestDay(Schema, kw_only=True):
    day: date
    status: str
    """The object's status after the day's evaluation, as the rule would have left it."""
    budget: str | None
    """Its budget then (major units), as the rule would have left it."""
    spend: str
    """What Meta reported it spent that day (under the decisions actually taken)."""
    paused_spend: str
    """That spend when the rule would have had it paused for the day."""
    matched: list[int]
    """Tasks whose conditions passed that day."""


class BacktestObject(Schema, kw_only=True):
    account_id: int
    id: str
    name: str
    start_status: str
    start_budget: str | None
    paused_spend: str
    would_execute: int
    days: list[BacktestDay]


class BacktestAccount(Schema, kw_only=True):
    id: int
    meta_id: str
    name: str
    currency: str
    timezone: str
    """The account's zone: its Insights days and the evaluation times."""
    clock_timezone: str
    """The zone clock conditions and ``{date}`` read (the rule's, else the account's)."""
    objects: int = 0
    truncated: bool = False
    data_since: date | None = None
    """The first day read (periods such as ``last_7d`` look back before the range)."""
    graph_calls: int = 0
    insights_rows: int = 0
    unread_objects: int = 0
    """Objects whose Insights could not be read (left out of the replay)."""
    error: str | None = None
    spend_paused: str = "0"
    """Spend, in the account's currency, on days the rule would have had objects paused."""
    budget_raised: str = "0"
    budget_lowered: str = "0"


class BacktestTotals(Schema, kw_only=True):
    evaluations: int = 0
    matches: int = 0
    would_execute: int = 0
    skipped: int = 0
    not_executed: int = 0
    errors: int = 0
    objects_matched: int = 0


class BacktestResult(Schema, kw_only=True):
    rule_id: int | None
    """None for a rule not saved yet."""
    rule_name: str
    level: str
    since: date
    until: date
    evaluate_at: str
    estimate: bool = True
    note: str = ESTIMATE_NOTE
    caveats: list[str] = []
    accounts: list[BacktestAccount]
    totals: BacktestTotals
    actions: list[BacktestAction]
    """Every match, in the order of the evaluations (day, task, object)."""
    actions_truncated: bool = False
    objects: list[BacktestObject]
    graph_calls: int
    evaluated_at: datetime
