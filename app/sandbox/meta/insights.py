"""Deterministic Insights rows: the same campaign and date preset always give the same numbers.

Each campaign draws its daily rates from a generator seeded with its id, then scales them by the
preset's number of days. Derived figures (CTR, CPC, ROAS…) are computed from the drawn counts the
way Meta computes them. Money is in the account currency's major units, as strings.
"""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

PRESET_DAYS = {
    "today": 1,
    "yesterday": 1,
    "last_3d": 3,
    "last_7d": 7,
    "last_14d": 14,
    "last_28d": 28,
    "last_30d": 30,
    "last_90d": 90,
    "this_month": 15,
    "last_month": 30,
    "maximum": 180,
}

SCALAR_FIELDS = (
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
)
LIST_FIELDS = (
    "outbound_clicks",
    "outbound_clicks_ctr",
    "cost_per_outbound_click",
    "actions",
    "action_values",
    "cost_per_action_type",
    "purchase_roas",
    "video_play_actions",
    "video_p25_watched_actions",
    "video_p50_watched_actions",
    "video_p75_watched_actions",
    "video_p100_watched_actions",
    "video_thruplay_watched_actions",
    "cost_per_thruplay",
)
IDENTITY_FIELDS = (
    "campaign_id",
    "campaign_name",
    "adset_id",
    "adset_name",
    "ad_id",
    "ad_name",
    "account_id",
    "date_start",
    "date_stop",
)
INSIGHTS_FIELDS = frozenset(SCALAR_FIELDS + LIST_FIELDS + IDENTITY_FIELDS)
"""Every field the simulator knows; asking for another is a (#100) error, as at Meta."""


def _money(value: Decimal, decimals: int) -> str:
    quantum = Decimal(1).scaleb(-decimals)
    return str(value.quantize(quantum, rounding=ROUND_HALF_UP))


def _ratio(numerator: Decimal, denominator: Decimal, scale: int = 6) -> str | None:
    if denominator == 0:
        return None
    return str((numerator / denominator).quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP))


def _entries(pairs: dict[str, str | None]) -> list[dict[str, str]]:
    return [{"action_type": k, "value": v} for k, v in pairs.items() if v is not None]


def generate_row(campaign_id: str, preset: str, money_decimals: int) -> dict[str, Any]:
    """The full Insights row of a delivering campaign for ``preset``."""
    days = PRESET_DAYS[preset]
    rng = random.Random(f"insights:{campaign_id}")
    # Daily rates are the campaign's; the preset only scales the counts.
    impressions_per_day = rng.randint(800, 6000)
    reach_share = Decimal(rng.randint(55, 85)) / 100
    ctr = Decimal(rng.randint(40, 300)) / 10_000
    cpc = Decimal(rng.randint(15, 180)) / 100
    conversion = Decimal(rng.randint(0, 60)) / 1000
    order_value = Decimal(rng.randint(2000, 12000)) / 100
    # A little variation between presets of the same length, still deterministic.
    wobble = Decimal(random.Random(f"wobble:{campaign_id}:{preset}").randint(90, 110)) / 100

    impressions = int(impressions_per_day * days * wobble)
    reach = max(1, int(impressions * reach_share))
    clicks = int(impressions * ctr)
    unique_clicks = int(clicks * Decimal("0.9"))
    spend = Decimal(clicks) * cpc
    link_clicks = int(clicks * Decimal("0.8"))
    outbound = int(link_clicks * Decimal("0.9"))
    landing = int(outbound * Decimal("0.8"))
    add_to_cart = int(landing * Decimal("0.12"))
    checkout = int(add_to_cart * Decimal("0.5"))
    purchases = int(Decimal(clicks) * conversion)
    purchase_value = Decimal(purchases) * order_value
    leads = int(landing * Decimal("0.03"))
    registrations = int(landing * Decimal("0.02"))
    video_plays = int(impressions * Decimal("0.2"))
    p25, p50 = int(video_plays * Decimal("0.6")), int(video_plays * Decimal("0.4"))
    p75, p100 = int(video_plays * Decimal("0.25")), int(video_plays * Decimal("0.1"))
    thruplays = int(video_plays * Decimal("0.15"))
    engagement = int(clicks * Decimal("1.6"))

    d_spend = Decimal(_money(spend, money_decimals))
    d_impr, d_reach, d_clicks = Decimal(impressions), Decimal(reach), Decimal(clicks)

    def cost_per(count: int) -> str | None:
        return None if count == 0 else _money(d_spend / count, money_decimals)

    row: dict[str, Any] = {
        "spend": _money(d_spend, money_decimals),
        "impressions": str(impressions),
        "reach": str(reach),
        "frequency": _ratio(d_impr, d_reach),
        "clicks": str(clicks),
        "unique_clicks": str(unique_clicks),
        "ctr": _ratio(d_clicks * 100, d_impr),
        "unique_ctr": _ratio(Decimal(unique_clicks) * 100, d_reach),
        "cpc": cost_per(clicks),
        "cpm": _ratio(d_spend * 1000, d_impr),
        "cpp": _ratio(d_spend * 1000, d_reach),
        "inline_link_clicks": str(link_clicks),
        "inline_link_click_ctr": _ratio(Decimal(link_clicks) * 100, d_impr),
        "cost_per_inline_link_click": cost_per(link_clicks),
        "outbound_clicks": _entries({"outbound_click": str(outbound)}),
        "outbound_clicks_ctr": _entries(
            {"outbound_click": _ratio(Decimal(outbound) * 100, d_impr)}
        ),
        "cost_per_outbound_click": _entries({"outbound_click": cost_per(outbound)}),
        "actions": _entries(
            {
                "link_click": str(link_clicks),
                "landing_page_view": str(landing),
                "add_to_cart": str(add_to_cart),
                "initiate_checkout": str(checkout),
                "purchase": str(purchases),
                "offsite_conversion.fb_pixel_purchase": str(purchases),
                "lead": str(leads),
                "complete_registration": str(registrations),
                "post_engagement": str(engagement),
                "video_view": str(video_plays),
            }
        ),
        "action_values": _entries(
            {
                "purchase": _money(purchase_value, money_decimals),
                "offsite_conversion.fb_pixel_purchase": _money(purchase_value, money_decimals),
            }
        ),
        "cost_per_action_type": _entries(
            {
                "landing_page_view": cost_per(landing),
                "add_to_cart": cost_per(add_to_cart),
                "initiate_checkout": cost_per(checkout),
                "purchase": cost_per(purchases),
                "lead": cost_per(leads),
                "complete_registration": cost_per(registrations),
            }
        ),
        "purchase_roas": _entries({"omni_purchase": _ratio(purchase_value, d_spend)}),
        "video_play_actions": _entries({"video_view": str(video_plays)}),
        "video_p25_watched_actions": _entries({"video_view": str(p25)}),
        "video_p50_watched_actions": _entries({"video_view": str(p50)}),
        "video_p75_watched_actions": _entries({"video_view": str(p75)}),
        "video_p100_watched_actions": _entries({"video_view": str(p100)}),
        "video_thruplay_watched_actions": _entries({"video_view": str(thruplays)}),
        "cost_per_thruplay": _entries({"video_view": cost_per(thruplays)}),
    }
    return {k: v for k, v in row.items() if v is not None and v != []}


def generate_daily_row(campaign_id: str, day: str, money_decimals: int) -> dict[str, Any]:
    """The Insights row of one delivering object for one day (``YYYY-MM-DD``): a one-day row
    whose rates vary from day to day, the same for the same object and day."""
    return generate_row(f"{campaign_id}@{day}", "today", money_decimals)
