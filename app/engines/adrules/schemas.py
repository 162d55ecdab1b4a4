"""The rule document: pre-filters, schedule, tasks, conditions and actions, as msgspec structs.

Conditions, actions and schedules are tagged unions (the ``type`` or ``mode`` field picks the
variant), so a rule is decoded and type-checked in one pass and an unknown metric, operator or period
is refused with the field's path. Rules that parse but break a rule of their own (a budget increase
without a maximum, an empty timetable…) are caught by :mod:`app.engines.adrules.validation`.

These structs are also the job payload's rule document: the worker reads exactly what was validated.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Literal

import msgspec

from app.engines.adrules.catalogue import (
    DEFAULT_INTERVAL_MINUTES,
    WEEKDAYS,
    Cooldown,
    EffectiveStatus,
    GroupOperator,
    Level,
    Metric,
    Operator,
    Period,
    RuleStatus,
    Weekday,
)
from app.schemas import RowRef, Schema, Text

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
TimeOfDay = Annotated[str, msgspec.Meta(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
"""A wall-clock time ``HH:MM`` (24 hours) in the workspace's time zone."""
Hour = Annotated[int, msgspec.Meta(ge=0, le=23)]
CampaignId = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,32}$")]

# -- pre-filters (spec AR-11) -------------------------------------------------------------------


class StatusFilter(Schema, kw_only=True):
    """Keep campaigns whose ``effective_status`` is (``in``) or is not (``not_in``) one of ``values``."""

    operator: Literal["in", "not_in"] = "in"
    values: Annotated[list[EffectiveStatus], msgspec.Meta(min_length=1, max_length=20)]


class PreFilters(Schema, kw_only=True):
    """Narrow the campaigns Meta returns, before anything crosses the wire."""

    campaign_ids: Annotated[list[CampaignId], msgspec.Meta(max_length=500)] = []
    name_contains: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    effective_status: StatusFilter | None = None


# -- schedule (spec AR-5 to AR-8) ---------------------------------------------------------------


class WeeklyGrid(Schema, kw_only=True):
    """Times of day per weekday, in the workspace's time zone."""

    mon: Annotated[list[TimeOfDay], msgspec.Meta(max_length=1440)] = []
    tue: Annotated[list[TimeOfDay], msgspec.Meta(max_length=1440)] = []
    wed: Annotated[list[TimeOfDay], msgspec.Meta(max_length=1440)] = []
    thu: Annotated[list[TimeOfDay], msgspec.Meta(max_length=1440)] = []
    fri: Annotated[list[TimeOfDay], msgspec.Meta(max_length=1440)] = []
    sat: Annotated[list[TimeOfDay], msgspec.Meta(max_length=1440)] = []
    sun: Annotated[list[TimeOfDay], msgspec.Meta(max_length=1440)] = []

    def slots(self, weekday: int) -> list[str]:
        """The sorted, distinct times of ``weekday`` (Monday 0)."""
        day: list[str] = getattr(self, ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[weekday])
        return sorted(set(day))

    def is_empty(self) -> bool:
        return not any(self.slots(i) for i in range(7))


class IntervalSchedule(Schema, kw_only=True, tag="interval", tag_field="mode"):
    """Run every ``minutes`` (spec AR-6)."""

    minutes: Annotated[int, msgspec.Meta(ge=1, le=10_080)] = DEFAULT_INTERVAL_MINUTES
    start_date: date | None = None
    end_date: date | None = None
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    """IANA zone of the times, the date window and clock conditions. Left out: the zone of the
    rule's ad accounts (Meta's ``timezone_name``, the zone of the account's Insights day), or the
    workspace's when the accounts are in different zones. Answered with the zone in use."""


class TimetableSchedule(Schema, kw_only=True, tag="timetable", tag_field="mode"):
    """Run at the times of a weekly grid (spec AR-7)."""

    week: WeeklyGrid
    start_date: date | None = None
    end_date: date | None = None
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    """IANA zone of the times, the date window and clock conditions. Left out: the zone of the
    rule's ad accounts (Meta's ``timezone_name``, the zone of the account's Insights day), or the
    workspace's when the accounts are in different zones. Answered with the zone in use."""


Schedule = IntervalSchedule | TimetableSchedule

# -- conditions (spec AR-9, AR-15, AR-16) -------------------------------------------------------


class MetricValueCondition(Schema, kw_only=True, tag="metric_value", tag_field="type"):
    """``metric`` over ``period`` compared with a fixed number (major units for money)."""

    metric: Metric
    period: Period = "today"
    operator: Operator
    value: Decimal


class MetricMetricCondition(Schema, kw_only=True, tag="metric_metric", tag_field="type"):
    """``metric`` over ``period`` compared with ``multiplier`` × ``other_metric`` over its own
    ``other_period`` (e.g. spend today > 1.5 × spend yesterday)."""

    metric: Metric
    period: Period = "today"
    operator: Operator
    other_metric: Metric
    other_period: Period = "today"
    multiplier: Decimal = Decimal(1)


class ClockCondition(Schema, kw_only=True, tag="clock", tag_field="type"):
    """Passes when the workspace's local hour is one of ``hours`` on one of ``weekdays`` (AR-9)."""

    hours: Annotated[list[Hour], msgspec.Meta(min_length=1, max_length=24)]
    weekdays: Annotated[list[Weekday], msgspec.Meta(min_length=1, max_length=7)] = msgspec.field(
        default_factory=lambda: list(WEEKDAYS)
    )


SheetLocale = Annotated[str, msgspec.Meta(pattern=r"^[a-z]{2}(_[A-Z]{2})?$", max_length=5)]


class CustomMetricCondition(Schema, kw_only=True, tag="custom_metric", tag_field="type"):
    """A number read from a Google Sheet: the row whose ``lookup_column`` equals the campaign id,
    its ``value_column`` compared with ``value`` (spec AR-15)."""

    spreadsheet_id: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{10,100}$")]
    sheet_name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    lookup_column: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{1,3}$")]
    value_column: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{1,3}$")]
    operator: Operator
    value: Decimal
    locale: SheetLocale | None = None
    """The sheet's locale (as in its File → Settings, e.g. ``de_DE``), which says how text cells
    write numbers (``1.234,50`` or ``1,234.50``). Without it only unambiguous text is read: a
    thousands or decimal separator that could be either is a recorded condition error."""


Condition = MetricValueCondition | MetricMetricCondition | ClockCondition | CustomMetricCondition

# -- actions (spec §4) --------------------------------------------------------------------------

Amount = Decimal
"""A positive number (checked by the validation module: msgspec has no bounds on Decimal)."""
BudgetChange = Literal["percent", "amount"]


class PauseCampaign(Schema, kw_only=True, tag="pause_campaign", tag_field="type"):
    """Set the campaign's status to PAUSED."""


class ActivateCampaign(Schema, kw_only=True, tag="activate_campaign", tag_field="type"):
    """Set the campaign's status to ACTIVE."""


class IncreaseBudget(Schema, kw_only=True, tag="increase_budget", tag_field="type"):
    """Raise the daily budget by ``amount`` percent or major units, never above ``max``."""

    by: BudgetChange = "percent"
    amount: Amount
    max: Amount | None = None
    """Required: the ceiling (major units). Optional only in the type so the error names it."""


class DecreaseBudget(Schema, kw_only=True, tag="decrease_budget", tag_field="type"):
    """Lower the daily budget by ``amount`` percent or major units, never below ``min``."""

    by: BudgetChange = "percent"
    amount: Amount
    min: Decimal | None = None
    """Required: the floor (major units). Optional only in the type so the error names it."""


class SetBudget(Schema, kw_only=True, tag="set_budget", tag_field="type"):
    """Set the daily budget to ``amount`` (major units)."""

    amount: Amount


class Rename(Schema, kw_only=True, tag="rename", tag_field="type"):
    """Rename from a template: ``{name}`` (current live name), ``{date}``, ``{rule}``."""

    template: Annotated[str, msgspec.Meta(min_length=1, max_length=400)]


class AppendToName(Schema, kw_only=True, tag="append_to_name", tag_field="type"):
    """Append ``text`` after ``separator``; nothing happens when it is already there."""

    text: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    separator: Annotated[str, msgspec.Meta(max_length=10)] = " "


class RemoveFromName(Schema, kw_only=True, tag="remove_from_name", tag_field="type"):
    """Remove ``text`` (with its ``separator``); nothing happens when it is absent."""

    text: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    separator: Annotated[str, msgspec.Meta(max_length=10)] = " "


Email = Annotated[str, msgspec.Meta(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=320)]


class NotifyEmail(Schema, kw_only=True, tag="notify_email", tag_field="type"):
    """Send an e-mail; ``subject`` may use ``{name}``, ``{rule}``, ``{date}``."""

    recipients: Annotated[list[Email], msgspec.Meta(min_length=1, max_length=20)]
    subject: Annotated[str, msgspec.Meta(min_length=1, max_length=300)]


WebhookFormat = Literal["signed_json", "slack", "teams"]


class NotifyWebhook(
    Schema, kw_only=True, tag="notify_webhook", tag_field="type", omit_defaults=True
):
    """POST the result to ``url`` with an HMAC-SHA256 signature of the body made with ``secret``.

    The secret is write-only (spec AR-24): it is stored encrypted and never answered; responses
    carry ``has_secret`` instead."""

    url: Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s]+$", max_length=2000)]
    format: WebhookFormat = "signed_json"
    """What the receiver reads: ``signed_json`` (our JSON, HMAC-signed with ``secret``),
    ``slack`` (a Slack incoming webhook: ``text`` + ``blocks``) or ``teams`` (a Microsoft Teams
    incoming webhook: an Adaptive Card message). Slack and Teams URLs carry their own secret."""
    secret: Annotated[str, msgspec.Meta(min_length=16, max_length=200)] | None = None
    """Write-only signing key: required for a new task; left out of an update, the stored one is
    kept."""
    has_secret: bool = False
    """Read-only: whether a signing secret is stored (ignored on input)."""
    sealed_secret: Text | None = None
    """Set by the server only: the secret encrypted with the server's key, as stored and as the
    worker receives it. Refused on input, never answered."""


BidTarget = Literal["any", "bid_cap", "cost_cap"]
"""Which ad sets a bid action changes: those bidding with a bid cap
(``LOWEST_COST_WITH_BID_CAP``), with a cost cap (``COST_CAP``), or either. Both keep the amount
in Meta's ad-set ``bid_amount``; other strategies have none and are skipped."""


class IncreaseBid(Schema, kw_only=True, tag="increase_bid", tag_field="type"):
    """Raise an ad set's bid cap or cost cap (``bid_amount``) by ``amount`` percent or major
    units, never above ``max`` (spec AR-40)."""

    by: BudgetChange = "percent"
    amount: Amount
    max: Amount | None = None
    """Required: the ceiling (major units). Optional only in the type so the error names it."""
    strategy: BidTarget = "any"


class DecreaseBid(Schema, kw_only=True, tag="decrease_bid", tag_field="type"):
    """Lower an ad set's bid cap or cost cap (``bid_amount``) by ``amount`` percent or major
    units, never below ``min`` (spec AR-40)."""

    by: BudgetChange = "percent"
    amount: Amount
    min: Decimal | None = None
    """Required: the floor (major units). Optional only in the type so the error names it."""
    strategy: BidTarget = "any"


class SetBid(Schema, kw_only=True, tag="set_bid", tag_field="type"):
    """Set an ad set's bid cap or cost cap (``bid_amount``) to ``amount`` major units (spec
    AR-40)."""

    amount: Amount
    strategy: BidTarget = "any"


class LogOnly(Schema, kw_only=True, tag="log_only", tag_field="type"):
    """Record the evaluation and change nothing: the safe default while tuning."""


Action = (
    PauseCampaign
    | ActivateCampaign
    | IncreaseBudget
    | DecreaseBudget
    | SetBudget
    | Rename
    | AppendToName
    | RemoveFromName
    | NotifyEmail
    | NotifyWebhook
    | LogOnly
    | IncreaseBid
    | DecreaseBid
    | SetBid
)

# -- tasks and rules ----------------------------------------------------------------------------


class TaskIn(Schema, kw_only=True):
    """A task: conditions folded with ``group``, one action, and its cooldown per campaign."""

    id: RowRef | None = None
    """Given when updating a rule, to keep the task's identity (and its cooldown history)."""
    name: Annotated[str, msgspec.Meta(max_length=200)] = ""
    conditions: Annotated[list[Condition], msgspec.Meta(max_length=100)] = []
    group: GroupOperator = "and"
    action: Action
    cooldown: Cooldown = "1h"


class Approval(Schema, kw_only=True):
    """Approve before acting (AR-28): the rule's runs propose their changes; a member approves
    them within ``window_hours`` of the run, or they expire unwritten."""

    required: bool = True
    window_hours: Annotated[int, msgspec.Meta(ge=1, le=168)] = 24


class RuleIn(Schema, kw_only=True):
    """Create or replace a rule (``PUT`` sends the whole rule)."""

    name: Name
    status: RuleStatus = "draft"
    level: Level = "campaign"
    """What the rule reads and acts on: campaigns, ad sets or ads (pre-filters, Insights and
    actions at that level; budget actions need a level that holds budgets)."""
    account_ids: Annotated[list[RowRef], msgspec.Meta(max_length=500)] = []
    """Ids of this workspace's ad accounts (``/accounts``) the rule covers."""
    prefilters: PreFilters = msgspec.field(default_factory=PreFilters)
    schedule: Schedule = msgspec.field(default_factory=IntervalSchedule)
    tasks: Annotated[list[TaskIn], msgspec.Meta(max_length=100)] = []
    attribution_windows: (
        Annotated[list[Annotated[str, msgspec.Meta(max_length=40)]], msgspec.Meta(max_length=5)]
        | None
    ) = None
    """Meta's ``action_attribution_windows`` conversions are counted with (spec AR-41): at most
    one click window (``1d_click``, ``7d_click``, ``28d_click``) with ``1d_view`` and/or
    ``1d_ev``. Left out: each ad set's own attribution setting (Meta's unified setting)."""
    approval: Approval | None = None
    """Set with ``required: true``: every change the rule would write waits for a member's
    approval (notifications and ``log_only`` are not held)."""


class StatusIn(Schema, kw_only=True):
    status: RuleStatus


# -- documents handed to the worker -------------------------------------------------------------


class TaskDocument(Schema, kw_only=True):
    """A stored task, with its id (the worker keys cooldowns and records by it)."""

    id: int
    name: str
    conditions: list[Condition]
    group: GroupOperator
    action: Action
    cooldown: Cooldown


class RuleDocument(Schema, kw_only=True):
    """Everything about a rule the worker needs, as validated and stored."""

    id: int
    workspace_id: int
    name: str
    timezone: str
    """The zone the rule names (its schedule's), or "" for each ad account's own zone: clock
    conditions, ``{date}`` and records use it."""
    prefilters: PreFilters
    tasks: list[TaskDocument]
    updated_at: datetime
    level: Level = "campaign"
    attribution_windows: list[str] | None = None
    """The rule's attribution windows (spec AR-41); None: each ad set's own setting."""
    shadow: bool = False
    """A shadow rule: evaluate, re-read and plan as live, record what would be done, write and send
    nothing."""
    approval: Approval | None = None
    """Changes wait for a member's approval (AR-28); None: they are written at once."""
