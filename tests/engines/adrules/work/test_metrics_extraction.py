"""Extraction of every Insights metric from realistic Insights rows, in a two-decimal currency (USD)
and a zero-decimal one (JPY), the no-row rule, and zero denominators (spec §4, AR-16)."""

from __future__ import annotations

from decimal import Decimal

import msgspec
import pytest

from app.engines.adrules.catalogue import INSIGHTS_METRICS, RATIO_METRICS
from app.engines.adrules.work.metrics import (
    INSIGHTS_SPECS,
    InsightsRow,
    budget_to_major,
    insights_fields,
    insights_value,
    major_to_minor,
)


def _av(**values: str) -> list[dict[str, str]]:
    return [{"action_type": k.replace("__", "."), "value": v} for k, v in values.items()]


USD_ROW = {
    "date_start": "2026-02-23",
    "date_stop": "2026-03-01",
    "account_currency": "USD",
    "spend": "250.75",
    "impressions": "12000",
    "reach": "8000",
    "frequency": "1.5",
    "clicks": "300",
    "unique_clicks": "250",
    "ctr": "2.5",
    "unique_ctr": "3.125",
    "cpc": "0.835833",
    "cpm": "20.895833",
    "cpp": "31.34375",
    "inline_link_clicks": "200",
    "inline_link_click_ctr": "1.666667",
    "cost_per_inline_link_click": "1.25375",
    "outbound_clicks": _av(outbound_click="150"),
    "outbound_clicks_ctr": _av(outbound_click="1.25"),
    "cost_per_outbound_click": _av(outbound_click="1.671667"),
    "actions": _av(
        link_click="200",
        landing_page_view="120",
        omni_purchase="11",
        purchase="10",
        offsite_conversion__fb_pixel_purchase="10",
        add_to_cart="40",
        offsite_conversion__fb_pixel_add_to_cart="40",
        initiate_checkout="20",
        lead="5",
        complete_registration="3",
        post_engagement="900",
        video_view="700",
    ),
    "action_values": _av(purchase="1003.10", omni_purchase="1100.00"),
    "cost_per_action_type": _av(
        landing_page_view="2.089583",
        purchase="25.075",
        add_to_cart="6.26875",
        initiate_checkout="12.5375",
        lead="50.15",
        complete_registration="83.583333",
    ),
    "purchase_roas": _av(omni_purchase="4.000399"),
    "video_play_actions": _av(video_view="700"),
    "video_p25_watched_actions": _av(video_view="500"),
    "video_p50_watched_actions": _av(video_view="300"),
    "video_p75_watched_actions": _av(video_view="200"),
    "video_p100_watched_actions": _av(video_view="90"),
    "video_thruplay_watched_actions": _av(video_view="150"),
    "cost_per_thruplay": _av(video_view="1.671667"),
}

USD_EXPECTED = {
    "spend": "250.75",
    "impressions": "12000",
    "reach": "8000",
    "frequency": "1.5",
    "clicks": "300",
    "unique_clicks": "250",
    "ctr": "2.5",
    "unique_ctr": "3.125",
    "cpc": "0.835833",
    "cpm": "20.895833",
    "cpp": "31.34375",
    "inline_link_clicks": "200",
    "inline_link_click_ctr": "1.666667",
    "cost_per_inline_link_click": "1.25375",
    "outbound_clicks": "150",
    "outbound_clicks_ctr": "1.25",
    "cost_per_outbound_click": "1.671667",
    "landing_page_views": "120",
    "cost_per_landing_page_view": "2.089583",
    "purchases": "10",
    "purchase_value": "1003.10",
    "purchase_roas": "4.000399",
    "cost_per_purchase": "25.075",
    "add_to_cart": "40",
    "cost_per_add_to_cart": "6.26875",
    "initiate_checkout": "20",
    "cost_per_initiate_checkout": "12.5375",
    "leads": "5",
    "cost_per_lead": "50.15",
    "complete_registration": "3",
    "cost_per_complete_registration": "83.583333",
    "video_plays": "700",
    "video_p25_watched": "500",
    "video_p50_watched": "300",
    "video_p75_watched": "200",
    "video_p100_watched": "90",
    "thruplays": "150",
    "cost_per_thruplay": "1.671667",
    "post_engagement": "900",
}

# Yen has no minor unit: money arrives as whole numbers (and Meta still sends ratios with decimals).
JPY_ROW = {
    "spend": "31500",
    "impressions": "45000",
    "reach": "30000",
    "frequency": "1.5",
    "clicks": "900",
    "unique_clicks": "800",
    "ctr": "2",
    "unique_ctr": "2.666667",
    "cpc": "35",
    "cpm": "700",
    "cpp": "1050",
    "inline_link_clicks": "600",
    "inline_link_click_ctr": "1.333333",
    "cost_per_inline_link_click": "52.5",
    "outbound_clicks": _av(outbound_click="450"),
    "outbound_clicks_ctr": _av(outbound_click="1"),
    "cost_per_outbound_click": _av(outbound_click="70"),
    "actions": _av(
        landing_page_view="420",
        offsite_conversion__fb_pixel_purchase="21",
        omni_purchase="22",
        offsite_conversion__fb_pixel_add_to_cart="63",
        offsite_conversion__fb_pixel_initiate_checkout="30",
        onsite_conversion__lead_grouped="7",
        offsite_conversion__fb_pixel_complete_registration="9",
        post_engagement="2500",
    ),
    "action_values": _av(offsite_conversion__fb_pixel_purchase="94500"),
    "cost_per_action_type": _av(
        landing_page_view="75",
        offsite_conversion__fb_pixel_purchase="1500",
        offsite_conversion__fb_pixel_add_to_cart="500",
        offsite_conversion__fb_pixel_initiate_checkout="1050",
        onsite_conversion__lead_grouped="4500",
        offsite_conversion__fb_pixel_complete_registration="3500",
    ),
    "purchase_roas": _av(omni_purchase="3"),
    "video_play_actions": _av(video_view="2000"),
    "video_p25_watched_actions": _av(video_view="1500"),
    "video_p50_watched_actions": _av(video_view="1000"),
    "video_p75_watched_actions": _av(video_view="600"),
    "video_p100_watched_actions": _av(video_view="250"),
    "video_thruplay_watched_actions": _av(video_view="420"),
    "cost_per_thruplay": _av(video_view="75"),
}

JPY_EXPECTED = {
    "spend": "31500",
    "impressions": "45000",
    "reach": "30000",
    "frequency": "1.5",
    "clicks": "900",
    "unique_clicks": "800",
    "ctr": "2",
    "unique_ctr": "2.666667",
    "cpc": "35",
    "cpm": "700",
    "cpp": "1050",
    "inline_link_clicks": "600",
    "inline_link_click_ctr": "1.333333",
    "cost_per_inline_link_click": "52.5",
    "outbound_clicks": "450",
    "outbound_clicks_ctr": "1",
    "cost_per_outbound_click": "70",
    "landing_page_views": "420",
    "cost_per_landing_page_view": "75",
    "purchases": "21",
    "purchase_value": "94500",
    "purchase_roas": "3",
    "cost_per_purchase": "1500",
    "add_to_cart": "63",
    "cost_per_add_to_cart": "500",
    "initiate_checkout": "30",
    "cost_per_initiate_checkout": "1050",
    "leads": "7",
    "cost_per_lead": "4500",
    "complete_registration": "9",
    "cost_per_complete_registration": "3500",
    "video_plays": "2000",
    "video_p25_watched": "1500",
    "video_p50_watched": "1000",
    "video_p75_watched": "600",
    "video_p100_watched": "250",
    "thruplays": "420",
    "cost_per_thruplay": "75",
    "post_engagement": "2500",
}


def _row(payload: dict[str, object]) -> InsightsRow:
    # Through JSON, as the row arrives from the Graph API.
    return msgspec.json.decode(msgspec.json.encode(payload), type=InsightsRow)


def test_every_insights_metric_of_the_catalogue_has_an_extraction() -> None:
    assert set(INSIGHTS_SPECS) == set(INSIGHTS_METRICS)
    assert set(USD_EXPECTED) == set(JPY_EXPECTED) == set(INSIGHTS_METRICS)


@pytest.mark.parametrize("metric", INSIGHTS_METRICS)
@pytest.mark.parametrize(
    ("payload", "expected"), [(USD_ROW, USD_EXPECTED), (JPY_ROW, JPY_EXPECTED)], ids=["USD", "JPY"]
)
def test_insights_metric_extraction(
    metric: str, payload: dict[str, object], expected: dict[str, str]
) -> None:
    value = insights_value(metric, _row(payload))
    assert isinstance(value, Decimal)
    assert value == Decimal(expected[metric])
    # Exact digits, not a float's approximation.
    assert str(value) == expected[metric]


@pytest.mark.parametrize("metric", INSIGHTS_METRICS)
def test_no_row_means_zero_for_sums_and_no_value_for_ratios(metric: str) -> None:
    """AR-16: no delivery in the period (``{"data": []}``) → sums and counts 0, ratios no value."""
    value = insights_value(metric, None)
    if metric in RATIO_METRICS:
        assert value is None
    else:
        assert value == 0


def test_ratios_have_no_value_when_the_denominator_is_zero() -> None:
    row = _row(
        {
            "spend": "0.00",
            "impressions": "0",
            "reach": "0",
            "clicks": "0",
            "ctr": "0",
            "cpc": "0",
            "cpm": "0",
            "frequency": "0",
            "actions": [],
            "purchase_roas": _av(omni_purchase="0"),
            "cost_per_action_type": _av(purchase="0"),
        }
    )
    for metric in (
        "ctr",
        "cpc",
        "cpm",
        "frequency",
        "cpp",
        "purchase_roas",
        "cost_per_purchase",
        "cost_per_lead",
    ):
        assert insights_value(metric, row) is None, metric
    for metric in ("spend", "impressions", "clicks", "purchases", "leads", "video_plays"):
        assert insights_value(metric, row) == 0, metric


def test_action_types_are_picked_not_summed() -> None:
    # purchase, the pixel's purchase and omni_purchase overlap: the first present wins.
    row = _row({"actions": _av(omni_purchase="12", offsite_conversion__fb_pixel_purchase="10")})
    assert insights_value("purchases", row) == 10


def test_fields_are_deduplicated_per_period() -> None:
    fields = insights_fields(
        ["spend", "purchase_roas", "cost_per_purchase", "purchases", "hour_of_day"]
    )
    assert fields == ["actions", "cost_per_action_type", "purchase_roas", "spend"]


def test_a_non_numeric_value_is_a_decode_error() -> None:
    with pytest.raises(msgspec.ValidationError):
        _row({"spend": "lots"})


@pytest.mark.parametrize(
    ("minor", "currency", "major"),
    [
        ("5050", "USD", "50.50"),
        ("5000", "EUR", "50.00"),
        ("5000", "JPY", "5000"),
        ("150000", "IDR", "150000"),
        (None, "USD", None),
        ("", "USD", None),
    ],
)
def test_budgets_are_converted_with_the_currency_offset(
    minor: str | None, currency: str, major: str | None
) -> None:
    value = budget_to_major(minor, currency)
    if major is None:
        assert value is None
    else:
        assert str(value) == major
        assert major_to_minor(Decimal(major), currency) == int(minor or 0)


def test_major_to_minor_rounds_half_up() -> None:
    assert major_to_minor(Decimal("10.005"), "USD") == 1001
    assert major_to_minor(Decimal("99.5"), "JPY") == 100
