"""The fixed vocabularies of ad rules: reporting periods, operators, metrics, actions, cooldowns.

These are the catalogues rules are validated against (45 metrics, 11 periods, 6 operators,
11 actions, 11 cooldowns). The ``Literal`` types are what the request schemas accept; the tuples and
maps derived from them are what the rest of the engine reads.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, get_args

# A rule's statuses live with its transitions; the names stay importable from here.
from app.engines.adrules.rule_states import RULE_STATUSES as RULE_STATUSES
from app.engines.adrules.rule_states import SCHEDULED_STATUSES as SCHEDULED_STATUSES
from app.engines.adrules.rule_states import RuleStatus as RuleStatus

# -- reporting periods --------------------------------------------------------------------------

Period = Literal[
    "today",
    "yesterday",
    "last_3d",
    "last_7d",
    "last_14d",
    "last_28d",
    "last_30d",
    "last_90d",
    "this_month",
    "last_month",
    "lifetime",
]
PERIODS: tuple[Period, ...] = get_args(Period)

DATE_PRESETS: dict[Period, str] = {
    "today": "today",
    "yesterday": "yesterday",
    "last_3d": "last_3d",
    "last_7d": "last_7d",
    "last_14d": "last_14d",
    "last_28d": "last_28d",
    "last_30d": "last_30d",
    "last_90d": "last_90d",
    "this_month": "this_month",
    "last_month": "last_month",
    # The Graph API has no "lifetime" preset; "maximum" is everything the account reports.
    "lifetime": "maximum",
}
"""Graph API ``date_preset`` of each reporting period."""

# -- operators ----------------------------------------------------------------------------------

Operator = Literal["gt", "gte", "lt", "lte", "eq", "neq"]
OPERATORS: tuple[Operator, ...] = get_args(Operator)

OPERATOR_SYMBOLS: dict[Operator, str] = {
    "gt": ">",
    "gte": "≥",
    "lt": "<",
    "lte": "≤",
    "eq": "=",
    "neq": "≠",
}

GroupOperator = Literal["and", "or"]

# -- metrics ------------------------------------------------------------------------------------

InsightsMetric = Literal[
    "spend",
    "impressions",
    "reach",
    "frequency",
    "clicks",
    "unique_clicks",
    "ctr",
    "unique_ctr",
    "cpc",
    "cpm",
    "cpp",
    "inline_link_clicks",
    "inline_link_click_ctr",
    "cost_per_inline_link_click",
    "outbound_clicks",
    "outbound_clicks_ctr",
    "cost_per_outbound_click",
    "landing_page_views",
    "cost_per_landing_page_view",
    "purchases",
    "purchase_value",
    "purchase_roas",
    "cost_per_purchase",
    "add_to_cart",
    "cost_per_add_to_cart",
    "initiate_checkout",
    "cost_per_initiate_checkout",
    "leads",
    "cost_per_lead",
    "complete_registration",
    "cost_per_complete_registration",
    "video_plays",
    "video_p25_watched",
    "video_p50_watched",
    "video_p75_watched",
    "video_p100_watched",
    "thruplays",
    "cost_per_thruplay",
    "post_engagement",
]
"""Metrics read from the Insights API (in the batched per-campaign call)."""

OtherMetric = Literal[
    "hour_of_day",
    "weekday",
    "daily_budget",
    "campaign_age_days",
    "lifetime_budget",
    "custom_metric",
]
"""Metrics resolved without Insights: the clock, the campaign itself, or a spreadsheet."""

Metric = Literal[InsightsMetric, OtherMetric]

INSIGHTS_METRICS: tuple[InsightsMetric, ...] = get_args(InsightsMetric)
OTHER_METRICS: tuple[OtherMetric, ...] = get_args(OtherMetric)
METRICS: tuple[str, ...] = INSIGHTS_METRICS + OTHER_METRICS

RATIO_METRICS: frozenset[str] = frozenset(
    {
        "frequency",
        "ctr",
        "unique_ctr",
        "cpc",
        "cpm",
        "cpp",
        "inline_link_click_ctr",
        "cost_per_inline_link_click",
        "outbound_clicks_ctr",
        "cost_per_outbound_click",
        "cost_per_landing_page_view",
        "purchase_roas",
        "cost_per_purchase",
        "cost_per_add_to_cart",
        "cost_per_initiate_checkout",
        "cost_per_lead",
        "cost_per_complete_registration",
        "cost_per_thruplay",
    }
)
"""Insights metrics that are ratios: with no delivery in the period they have *no value*; every other
Insights metric is a sum or a count and reads as 0 (spec AR-16)."""

MONEY_METRICS: frozenset[str] = frozenset(
    {
        "spend",
        "cpc",
        "cpm",
        "cpp",
        "cost_per_inline_link_click",
        "cost_per_outbound_click",
        "cost_per_landing_page_view",
        "purchase_value",
        "cost_per_purchase",
        "cost_per_add_to_cart",
        "cost_per_initiate_checkout",
        "cost_per_lead",
        "cost_per_complete_registration",
        "cost_per_thruplay",
        "daily_budget",
        "lifetime_budget",
    }
)
"""Metrics in the account currency, in major units (budgets are converted from minor units)."""

# -- weekdays -----------------------------------------------------------------------------------

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[Weekday, ...] = get_args(Weekday)
"""Index in this tuple = ``date.weekday()`` (Monday 0)."""

# -- actions ------------------------------------------------------------------------------------

ActionName = Literal[
    "pause_campaign",
    "activate_campaign",
    "increase_budget",
    "decrease_budget",
    "set_budget",
    "rename",
    "append_to_name",
    "remove_from_name",
    "notify_email",
    "notify_webhook",
    "log_only",
]
ACTIONS: tuple[ActionName, ...] = get_args(ActionName)

GRAPH_WRITE_ACTIONS: frozenset[str] = frozenset(
    {
        "pause_campaign",
        "activate_campaign",
        "increase_budget",
        "decrease_budget",
        "set_budget",
        "rename",
        "append_to_name",
        "remove_from_name",
    }
)
"""Actions that write to the Graph API (the notify actions and ``log_only`` do not)."""

BUDGET_ACTIONS: frozenset[str] = frozenset({"increase_budget", "decrease_budget", "set_budget"})
NAME_ACTIONS: frozenset[str] = frozenset({"rename", "append_to_name", "remove_from_name"})

# -- cooldowns ----------------------------------------------------------------------------------

Cooldown = Literal["15m", "30m", "1h", "2h", "3h", "6h", "12h", "24h", "3d", "7d", "lifetime"]
COOLDOWNS: tuple[Cooldown, ...] = get_args(Cooldown)

COOLDOWN_DURATIONS: dict[Cooldown, timedelta | None] = {
    "15m": timedelta(minutes=15),
    "30m": timedelta(minutes=30),
    "1h": timedelta(hours=1),
    "2h": timedelta(hours=2),
    "3h": timedelta(hours=3),
    "6h": timedelta(hours=6),
    "12h": timedelta(hours=12),
    "24h": timedelta(hours=24),
    "3d": timedelta(days=3),
    "7d": timedelta(days=7),
    # Once in a lifetime: after one executed action the task never acts on that campaign again.
    "lifetime": None,
}
"""How long after an executed action the same task may act on the same campaign again."""

COOLDOWN_LABELS: dict[Cooldown, str] = {
    "15m": "15 minutes",
    "30m": "30 minutes",
    "1h": "1 hour",
    "2h": "2 hours",
    "3h": "3 hours",
    "6h": "6 hours",
    "12h": "12 hours",
    "24h": "24 hours",
    "3d": "3 days",
    "7d": "7 days",
    "lifetime": "once in a lifetime",
}

# -- campaigns and rules ------------------------------------------------------------------------

EffectiveStatus = Literal["ACTIVE", "PAUSED", "DELETED", "ARCHIVED", "IN_PROCESS", "WITH_ISSUES"]
EFFECTIVE_STATUSES: tuple[EffectiveStatus, ...] = get_args(EffectiveStatus)


Level = Literal["campaign", "adset", "ad"]
"""The objects a rule reads and acts on, as Meta's own rules choose (``evaluation_spec``)."""
LEVELS: tuple[Level, ...] = get_args(Level)
LEVEL_EDGES: dict[str, str] = {"campaign": "campaigns", "adset": "adsets", "ad": "ads"}
"""The ad account's Graph edge listing each level's objects."""
LEVEL_FIELDS: dict[str, tuple[str, ...]] = {
    "campaign": (
        "id",
        "name",
        "effective_status",
        "status",
        "daily_budget",
        "lifetime_budget",
        "created_time",
    ),
    "adset": (
        "id",
        "name",
        "effective_status",
        "status",
        "daily_budget",
        "lifetime_budget",
        "created_time",
    ),
    # An ad has no budget field: asking for one is refused by the Graph API.
    "ad": ("id", "name", "effective_status", "status", "created_time"),
}

DEFAULT_INTERVAL_MINUTES = 60
"""Interval of a rule that sets none (spec AR-6)."""

# -- bids and attribution (spec AR-40, AR-41) ---------------------------------------------------

BID_ACTIONS: frozenset[str] = frozenset({"increase_bid", "decrease_bid", "set_bid"})
"""Actions on an ad set's ``bid_amount`` (its bid cap or cost cap); beside the seed's 11."""
CAPPED_STRATEGIES: dict[str, str] = {
    "LOWEST_COST_WITH_BID_CAP": "bid_cap",
    "COST_CAP": "cost_cap",
}
"""Meta's bid strategies that hold an amount in ``bid_amount``, and the bid target naming each."""
STRATEGY_LABELS: dict[str, str] = {
    "LOWEST_COST_WITHOUT_CAP": "highest volume (no cap)",
    "LOWEST_COST_WITH_BID_CAP": "bid cap",
    "COST_CAP": "cost per result goal (cost cap)",
    "LOWEST_COST_WITH_MIN_ROAS": "ROAS goal",
}

CLICK_WINDOWS: tuple[str, ...] = ("1d_click", "7d_click", "28d_click")
VIEW_WINDOWS: tuple[str, ...] = ("1d_view",)
ENGAGED_VIEW_WINDOWS: tuple[str, ...] = ("1d_ev",)
ATTRIBUTION_WINDOWS: tuple[str, ...] = CLICK_WINDOWS + VIEW_WINDOWS + ENGAGED_VIEW_WINDOWS
"""Meta's ``action_attribution_windows`` a rule may choose: one click window, with the one-day
view and the one-day engaged-view windows."""
RETIRED_WINDOWS: frozenset[str] = frozenset({"7d_view", "28d_view"})
"""Windows Meta stopped reporting in the Insights API (January 2026)."""
UNIFIED_ATTRIBUTION = "unified"
"""What a record says when the Insights were read with each ad set's own attribution setting."""
