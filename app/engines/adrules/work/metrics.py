"""How each of the 45 metrics gets its number.

Insights metrics (39) are read from one Insights row per campaign and period; each declares the
Insights ``fields`` it needs so the worker can ask for exactly those, de-duplicated per period.
Numbers stay exact: Meta sends them as strings, decoded into :class:`~decimal.Decimal`, never float.

The no-row rule (spec AR-16, §7): a campaign with no delivery in the period has no Insights row;
sums and counts then read 0 and ratios have *no value* (``None``). A ratio also has no value when its
denominator is zero, even if Meta sent a number for it.

The six other metrics are resolved without Insights: the hour and weekday in the workspace's time
zone, the campaign's daily and lifetime budget (minor units converted with the account currency's
offset), the campaign's age in days, and the custom metric (from a spreadsheet, in
:mod:`app.engines.adrules.work.sheets_values`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from zoneinfo import ZoneInfo

import msgspec

from app.engines.adrules.catalogue import INSIGHTS_METRICS, RATIO_METRICS

ZERO = Decimal(0)


class ActionValue(msgspec.Struct):
    """One entry of an Insights action array (``actions``, ``cost_per_action_type``, …)."""

    action_type: str
    value: Decimal


class InsightsRow(msgspec.Struct):
    """The Insights fields the product reads. Meta sends numbers as strings; anything absent is
    ``None``. Unknown fields are ignored (Meta adds fields over time)."""

    spend: Decimal | None = None
    impressions: Decimal | None = None
    reach: Decimal | None = None
    frequency: Decimal | None = None
    clicks: Decimal | None = None
    unique_clicks: Decimal | None = None
    ctr: Decimal | None = None
    unique_ctr: Decimal | None = None
    cpc: Decimal | None = None
    cpm: Decimal | None = None
    cpp: Decimal | None = None
    inline_link_clicks: Decimal | None = None
    inline_link_click_ctr: Decimal | None = None
    cost_per_inline_link_click: Decimal | None = None
    outbound_clicks: list[ActionValue] | None = None
    outbound_clicks_ctr: list[ActionValue] | None = None
    cost_per_outbound_click: list[ActionValue] | None = None
    actions: list[ActionValue] | None = None
    action_values: list[ActionValue] | None = None
    cost_per_action_type: list[ActionValue] | None = None
    purchase_roas: list[ActionValue] | None = None
    video_play_actions: list[ActionValue] | None = None
    video_p25_watched_actions: list[ActionValue] | None = None
    video_p50_watched_actions: list[ActionValue] | None = None
    video_p75_watched_actions: list[ActionValue] | None = None
    video_p100_watched_actions: list[ActionValue] | None = None
    video_thruplay_watched_actions: list[ActionValue] | None = None
    cost_per_thruplay: list[ActionValue] | None = None


# Meta reports the same conversion under several action types (the pixel's, the aggregated
# "omni" one, …). They overlap, so the first type present wins; they are never summed.
PURCHASE_TYPES = ("purchase", "offsite_conversion.fb_pixel_purchase", "omni_purchase")
ADD_TO_CART_TYPES = ("add_to_cart", "offsite_conversion.fb_pixel_add_to_cart", "omni_add_to_cart")
INITIATE_CHECKOUT_TYPES = (
    "initiate_checkout",
    "offsite_conversion.fb_pixel_initiate_checkout",
    "omni_initiated_checkout",
)
LEAD_TYPES = ("lead", "offsite_conversion.fb_pixel_lead", "onsite_conversion.lead_grouped")
REGISTRATION_TYPES = (
    "complete_registration",
    "offsite_conversion.fb_pixel_complete_registration",
    "omni_complete_registration",
)
LANDING_PAGE_VIEW_TYPES = ("landing_page_view", "omni_landing_page_view")
OUTBOUND_CLICK_TYPES = ("outbound_click",)
VIDEO_VIEW_TYPES = ("video_view",)
POST_ENGAGEMENT_TYPES = ("post_engagement",)


def pick(entries: list[ActionValue] | None, types: Iterable[str]) -> Decimal | None:
    """The value of the first action type of ``types`` present in ``entries``."""
    if not entries:
        return None
    by_type = {e.action_type: e.value for e in entries}
    for action_type in types:
        if action_type in by_type:
            return by_type[action_type]
    return None


Extract = Callable[[InsightsRow], Decimal | None]


@dataclass(frozen=True, slots=True)
class InsightsMetricSpec:
    """One Insights metric: the fields to request, how to read its value, and (for ratios) the
    denominator that must be non-zero for it to have a value."""

    name: str
    fields: tuple[str, ...]
    value: Extract
    denominator: Extract | None = None

    @property
    def is_ratio(self) -> bool:
        return self.name in RATIO_METRICS

    def extract(self, row: InsightsRow | None) -> Decimal | None:
        """The metric's value from one Insights row (``None`` row: no delivery in the period)."""
        if row is None:
            return None if self.is_ratio else ZERO
        if self.is_ratio:
            if self.denominator is not None:
                denominator = self.denominator(row)
                if denominator is None or denominator == 0:
                    return None
            return self.value(row)
        value = self.value(row)
        return ZERO if value is None else value


def _field(name: str) -> Extract:
    def read(row: InsightsRow) -> Decimal | None:
        value: Decimal | None = getattr(row, name)
        return value

    return read


def _typed(array: str, types: tuple[str, ...]) -> Extract:
    def read(row: InsightsRow) -> Decimal | None:
        return pick(getattr(row, array), types)

    return read


def _sum(name: str, field: str) -> InsightsMetricSpec:
    return InsightsMetricSpec(name, (field,), _field(field))


def _ratio(name: str, field: str, denominator_field: str) -> InsightsMetricSpec:
    return InsightsMetricSpec(
        name, (field, denominator_field), _field(field), denominator=_field(denominator_field)
    )


def _action_count(name: str, types: tuple[str, ...]) -> InsightsMetricSpec:
    return InsightsMetricSpec(name, ("actions",), _typed("actions", types))


def _cost_per_action(name: str, types: tuple[str, ...]) -> InsightsMetricSpec:
    return InsightsMetricSpec(
        name,
        ("cost_per_action_type", "actions"),
        _typed("cost_per_action_type", types),
        denominator=_typed("actions", types),
    )


def _video(name: str, field: str) -> InsightsMetricSpec:
    return InsightsMetricSpec(name, (field,), _typed(field, VIDEO_VIEW_TYPES))


_SPECS: tuple[InsightsMetricSpec, ...] = (
    _sum("spend", "spend"),
    _sum("impressions", "impressions"),
    _sum("reach", "reach"),
    _ratio("frequency", "frequency", "reach"),
    _sum("clicks", "clicks"),
    _sum("unique_clicks", "unique_clicks"),
    _ratio("ctr", "ctr", "impressions"),
    _ratio("unique_ctr", "unique_ctr", "reach"),
    _ratio("cpc", "cpc", "clicks"),
    _ratio("cpm", "cpm", "impressions"),
    _ratio("cpp", "cpp", "reach"),
    _sum("inline_link_clicks", "inline_link_clicks"),
    _ratio("inline_link_click_ctr", "inline_link_click_ctr", "impressions"),
    _ratio("cost_per_inline_link_click", "cost_per_inline_link_click", "inline_link_clicks"),
    InsightsMetricSpec(
        "outbound_clicks", ("outbound_clicks",), _typed("outbound_clicks", OUTBOUND_CLICK_TYPES)
    ),
    InsightsMetricSpec(
        "outbound_clicks_ctr",
        ("outbound_clicks_ctr", "impressions"),
        _typed("outbound_clicks_ctr", OUTBOUND_CLICK_TYPES),
        denominator=_field("impressions"),
    ),
    InsightsMetricSpec(
        "cost_per_outbound_click",
        ("cost_per_outbound_click", "outbound_clicks"),
        _typed("cost_per_outbound_click", OUTBOUND_CLICK_TYPES),
        denominator=_typed("outbound_clicks", OUTBOUND_CLICK_TYPES),
    ),
    _action_count("landing_page_views", LANDING_PAGE_VIEW_TYPES),
    _cost_per_action("cost_per_landing_page_view", LANDING_PAGE_VIEW_TYPES),
    _action_count("purchases", PURCHASE_TYPES),
    InsightsMetricSpec(
        "purchase_value", ("action_values",), _typed("action_values", PURCHASE_TYPES)
    ),
    InsightsMetricSpec(
        "purchase_roas",
        ("purchase_roas", "spend"),
        _typed("purchase_roas", ("omni_purchase", *PURCHASE_TYPES)),
        denominator=_field("spend"),
    ),
    _cost_per_action("cost_per_purchase", PURCHASE_TYPES),
    _action_count("add_to_cart", ADD_TO_CART_TYPES),
    _cost_per_action("cost_per_add_to_cart", ADD_TO_CART_TYPES),
    _action_count("initiate_checkout", INITIATE_CHECKOUT_TYPES),
    _cost_per_action("cost_per_initiate_checkout", INITIATE_CHECKOUT_TYPES),
    _action_count("leads", LEAD_TYPES),
    _cost_per_action("cost_per_lead", LEAD_TYPES),
    _action_count("complete_registration", REGISTRATION_TYPES),
    _cost_per_action("cost_per_complete_registration", REGISTRATION_TYPES),
    _video("video_plays", "video_play_actions"),
    _video("video_p25_watched", "video_p25_watched_actions"),
    _video("video_p50_watched", "video_p50_watched_actions"),
    _video("video_p75_watched", "video_p75_watched_actions"),
    _video("video_p100_watched", "video_p100_watched_actions"),
    _video("thruplays", "video_thruplay_watched_actions"),
    InsightsMetricSpec(
        "cost_per_thruplay",
        ("cost_per_thruplay", "video_thruplay_watched_actions"),
        _typed("cost_per_thruplay", VIDEO_VIEW_TYPES),
        denominator=_typed("video_thruplay_watched_actions", VIDEO_VIEW_TYPES),
    ),
    _action_count("post_engagement", POST_ENGAGEMENT_TYPES),
)

INSIGHTS_SPECS: dict[str, InsightsMetricSpec] = {spec.name: spec for spec in _SPECS}
if set(INSIGHTS_SPECS) != set(INSIGHTS_METRICS):  # pragma: no cover - a catalogue edit broke it
    raise RuntimeError("every Insights metric of the catalogue needs exactly one extraction")


def insights_fields(metrics: Iterable[str]) -> list[str]:
    """The de-duplicated, sorted Insights ``fields`` the given metrics need."""
    return sorted({f for m in metrics if m in INSIGHTS_SPECS for f in INSIGHTS_SPECS[m].fields})


def is_insights_metric(metric: str) -> bool:
    return metric in INSIGHTS_SPECS


def insights_value(metric: str, row: InsightsRow | None) -> Decimal | None:
    """The value of an Insights metric from the row of its period (``None``: no delivery)."""
    return INSIGHTS_SPECS[metric].extract(row)


# -- money and budgets ----------------------------------------------------------------------------

ZERO_DECIMAL_CURRENCIES = frozenset(
    {"CLP", "COP", "CRC", "HUF", "ISK", "IDR", "JPY", "KRW", "PYG", "TWD", "VND"}
)
"""Currencies whose Graph API amounts have offset 1 (no minor unit); every other has offset 100."""


def minor_unit_offset(currency: str) -> int:
    """How many Graph API budget units make one unit of ``currency``."""
    return 1 if currency.upper() in ZERO_DECIMAL_CURRENCIES else 100


def budget_to_major(minor: str | int | None, currency: str) -> Decimal | None:
    """A Graph API budget (minor units, as a string) in major units; ``None`` when unset/unreadable."""
    if minor is None or minor == "":
        return None
    try:
        units = Decimal(str(minor))
    except InvalidOperation:
        return None
    if units != units.to_integral_value():
        return None
    # scaleb keeps the exact digits: "5050" cents -> Decimal("50.50"), never a float.
    return units if minor_unit_offset(currency) == 1 else units.scaleb(-2)


def major_to_minor(amount: Decimal, currency: str) -> int:
    """A major-unit amount as Graph API minor units, rounded half-up to a whole unit."""
    scaled = amount * minor_unit_offset(currency)
    return int(scaled.quantize(Decimal(1), rounding=ROUND_HALF_UP))


# -- clock and campaign metrics ---------------------------------------------------------------------


def local_time(now: datetime, timezone: str) -> datetime:
    """``now`` on the workspace's wall clock."""
    return now.astimezone(ZoneInfo(timezone))


def hour_of_day(now: datetime, timezone: str) -> Decimal:
    """The hour (0-23) in the workspace's time zone."""
    return Decimal(local_time(now, timezone).hour)


def weekday(now: datetime, timezone: str) -> Decimal:
    """The weekday in the workspace's time zone, Monday 0 … Sunday 6 (``date.weekday()``)."""
    return Decimal(local_time(now, timezone).weekday())


def campaign_age_days(created: datetime | None, now: datetime) -> Decimal | None:
    """Whole days since the campaign was created (``None`` when Meta gave no creation time)."""
    if created is None:
        return None
    return Decimal(max(0, (now - created).days))
